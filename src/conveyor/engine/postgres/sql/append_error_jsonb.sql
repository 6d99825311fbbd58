(CASE WHEN jsonb_typeof(j.errors::jsonb) = 'array' THEN j.errors::jsonb ELSE '[]'::jsonb END) || jsonb_build_array(a.error)
