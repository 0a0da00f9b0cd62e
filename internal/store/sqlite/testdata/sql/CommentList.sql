SELECT id, issue_id, body, author_agent_id, author_board, run_id, created_at FROM comments
WHERE issue_id = :issue AND seq > :after_seq AND seq > :cursor_seq ORDER BY seq LIMIT :limit
