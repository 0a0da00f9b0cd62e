-- $1 = @issue
SELECT parent_id FROM issues WHERE id = $1::text
