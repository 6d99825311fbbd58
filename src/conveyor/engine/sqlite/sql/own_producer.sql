-- Whether the oban_producers row in scope is Conveyor's own (meta.runtime = 'conveyor'): 1, else 0 or
-- NULL (another runtime's row, or meta that is not a JSON object). Composed into other statements.
CASE WHEN json_valid(meta) THEN CASE
    WHEN json_type(meta) = 'object' THEN json_extract(meta, '$.runtime')
END END = 'conveyor'
