DELETE FROM oban_queues WHERE name = :name RETURNING name;
