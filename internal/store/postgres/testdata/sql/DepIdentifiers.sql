-- $1 = @ids
SELECT i.id, i.identifier FROM issues i WHERE i.id = ANY($1::text[])
