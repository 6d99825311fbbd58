worker IN (SELECT value FROM json_each(:workers))
