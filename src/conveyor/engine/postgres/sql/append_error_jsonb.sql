j.errors::jsonb || jsonb_build_array(a.error)
