-- $1 = @ids
SELECT i.id FROM issues i WHERE i.id = ANY($1::text[]) ORDER BY i.id FOR UPDATE
