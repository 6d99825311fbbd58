-- The optimizer's plan of a filter, for its row estimate: the rows its access path reads (an
-- index's estimate of the range or key it reads, else the table's size) and the share of them its
-- other conditions keep ("filtered"). MariaDB shows that share only with EXTENDED; MySQL always.
{explain} SELECT 1 FROM {prefix}.oban_jobs WHERE {filter};
