-- Take a lease nobody holds: the first node to insert the row leads (Dolphin's oban_peers). A row
-- there already leaves this to leader_lock.sql.
INSERT IGNORE INTO {prefix}.oban_peers (name, node, started_at, expires_at)
VALUES (%(name)s, %(node)s, %(now)s, %(expires_at)s);
