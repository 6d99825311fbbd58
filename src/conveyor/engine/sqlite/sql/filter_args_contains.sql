NOT EXISTS (
    -- Every key of the wanted object (nested ones too) is in args with that type, and every
    -- number or text with that value: containment, as PostgreSQL's jsonb @> (lists are refused
    -- by JobFilter). Malformed args never match: json_valid is tested before any other read.
    SELECT 1 FROM json_tree(:args_contains) AS want
    WHERE want.parent IS NOT NULL
      AND CASE
          WHEN json_valid(oban_jobs.args) THEN
              CASE
                  WHEN want.type IN ('integer', 'real') THEN
                      coalesce(
                          json_type(oban_jobs.args, want.fullkey) IN ('integer', 'real')
                          AND json_extract(oban_jobs.args, want.fullkey) = want.atom,
                          0
                      ) = 0
                  WHEN want.type = 'text' THEN
                      coalesce(
                          json_type(oban_jobs.args, want.fullkey) = 'text'
                          AND json_extract(oban_jobs.args, want.fullkey) = want.atom,
                          0
                      ) = 0
                  ELSE coalesce(json_type(oban_jobs.args, want.fullkey) = want.type, 0) = 0
              END
          ELSE 1
      END
)
