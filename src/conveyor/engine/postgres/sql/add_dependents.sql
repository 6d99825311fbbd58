-- Steps added to a stored workflow: list them among the dependents of the stored steps they depend
-- on (%(added)s: {stored step name: [new step names]}), so the settle after those finds them.
UPDATE {prefix}.oban_jobs AS d
SET meta = jsonb_set(
    d.meta,
    '{dependents}',
    CASE WHEN jsonb_typeof(d.meta -> 'dependents') = 'array' THEN d.meta -> 'dependents' ELSE '[]' END || a.names
)
FROM jsonb_each(%(added)s::jsonb) AS a(name, names)
WHERE d.meta ? 'workflow_id' AND (d.meta ->> 'workflow_id') = %(workflow)s AND (d.meta ->> 'name') = a.name
  AND jsonb_typeof(d.meta) = 'object'
RETURNING d.id;
