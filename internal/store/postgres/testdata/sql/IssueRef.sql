-- $1 = @rid
-- $2 = @rident
-- $3 = @company
SELECT i.id FROM issues i
WHERE (i.id = $1::text OR i.identifier = $2::text) AND ($3::text = '' OR i.company_id = $3::text)
