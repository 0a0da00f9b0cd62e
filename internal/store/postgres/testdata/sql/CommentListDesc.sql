-- $1 = @issue
-- $2 = @after
-- $3 = @cursor
-- $4 = @limit
SELECT id, issue_id, body, author_agent_id, author_board, run_id, created_at FROM comments
WHERE issue_id = $1::text
	AND seq > coalesce((SELECT seq FROM comments WHERE id = $2::text AND issue_id = $1::text), 0)
	AND seq < coalesce((SELECT seq FROM comments WHERE id = $3::text AND issue_id = $1::text), 9223372036854775807)
ORDER BY seq DESC LIMIT $4::integer
