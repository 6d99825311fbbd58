DELETE FROM oban_crons WHERE name = :name RETURNING name;
