-- A notification, written in the sender's transaction: its commit sends it, a rollback does not.
INSERT INTO {prefix}.conveyor_notifications (channel, payload) VALUES (%s, %s);
