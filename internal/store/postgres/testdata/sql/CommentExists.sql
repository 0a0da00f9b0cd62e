-- $1 = @id
-- $2 = @issue
SELECT EXISTS (SELECT 1 FROM comments WHERE id = $1::text AND issue_id = $2::text)
