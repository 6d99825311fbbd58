-- Containment, as PostgreSQL's jsonb @> (JobFilter refuses lists): every key of the wanted object,
-- nested ones too, is in args with an equal value.
(JSON_TYPE(args) = 'OBJECT' AND JSON_CONTAINS(args, %(args_contains)s))
