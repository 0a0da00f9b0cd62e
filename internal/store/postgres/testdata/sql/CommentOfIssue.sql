-- $1 = @id
-- $2 = @issue
SELECT id, issue_id, body, author_agent_id, author_board, run_id, created_at FROM comments
WHERE id = $1::text AND issue_id = $2::text
