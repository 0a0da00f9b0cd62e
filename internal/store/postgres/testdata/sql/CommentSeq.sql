-- $1 = @id
-- $2 = @issue
SELECT seq FROM comments WHERE id = $1::text AND issue_id = $2::text
