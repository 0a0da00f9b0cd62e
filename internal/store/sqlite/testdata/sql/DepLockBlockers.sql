SELECT count(*) FROM json_each(:ids)
