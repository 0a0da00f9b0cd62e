-- $1 = @issue
-- $2 = @after_seq
-- $3 = @cursor_seq
-- $4 = @limit
SELECT id, issue_id, body, author_agent_id, author_board, run_id, created_at FROM comments
WHERE issue_id = $1::text AND seq > $2::bigint AND seq < $3::bigint
ORDER BY seq DESC LIMIT $4::integer
