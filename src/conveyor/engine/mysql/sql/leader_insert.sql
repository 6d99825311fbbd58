-- Take a lease nobody holds: the first node to insert the row leads (Dolphin's oban_peers). A row
-- there already (affected rows 0: the no-op update changes nothing, and unlike INSERT IGNORE it
-- raises no warning for the driver to log) leaves this to leader_lock.sql.
INSERT INTO {prefix}.oban_peers (name, node, started_at, expires_at)
VALUES (%(name)s, %(node)s, %(now)s, %(expires_at)s)
ON DUPLICATE KEY UPDATE name = name;
