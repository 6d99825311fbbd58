INSERT INTO conveyor_notifications (channel, payload, source, created_at) VALUES (?, ?, ?, ?);
