SELECT table_name FROM information_schema.tables WHERE table_schema = {prefix_literal}
UNION
SELECT index_name FROM information_schema.statistics WHERE table_schema = {prefix_literal};
