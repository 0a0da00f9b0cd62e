SELECT i.id, i.identifier FROM issues i WHERE i.id IN (SELECT value FROM json_each(:ids))
