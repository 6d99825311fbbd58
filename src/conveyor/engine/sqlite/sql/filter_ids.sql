id IN (SELECT value FROM json_each(:ids))
