queue IN (SELECT value FROM json_each(:queues))
