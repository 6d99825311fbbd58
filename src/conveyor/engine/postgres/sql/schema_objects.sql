-- Which of the objects Conveyor's migrations create (the names given: tables, indexes, the enum
-- type, functions) exist in the schema given. Looked up by name in each catalog's (name, namespace)
-- index: scanning pg_class, pg_type and pg_proc for a namespace reads every row of them (thousands
-- in pg_proc alone, more in a database of many tables), about 6 ms on every install and check.
WITH ns AS (SELECT oid FROM pg_namespace WHERE nspname = %(prefix)s)
SELECT c.relname FROM pg_class AS c, ns
WHERE c.relname = ANY(%(names)s::name[]) AND c.relnamespace = ns.oid
UNION ALL
SELECT t.typname FROM pg_type AS t, ns
WHERE t.typname = ANY(%(names)s::name[]) AND t.typnamespace = ns.oid AND t.typtype = 'e'
UNION ALL
SELECT p.proname FROM pg_proc AS p, ns
WHERE p.proname = ANY(%(names)s::name[]) AND p.pronamespace = ns.oid
