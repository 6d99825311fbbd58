SELECT * FROM updated ORDER BY priority, scheduled_at, id
