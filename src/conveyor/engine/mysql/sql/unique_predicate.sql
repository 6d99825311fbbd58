conveyor_uniq_key IS NOT NULL
