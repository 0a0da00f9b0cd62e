-- $1 = @rid
-- $2 = @rident
-- $3 = @company
SELECT i.id FROM issues i
WHERE i.id = coalesce(nullif($1::text, ''), (SELECT ref.id FROM issues ref WHERE ref.identifier = $2::text)) AND ($3::text = '' OR i.company_id IS NOT DISTINCT FROM $3::text)
