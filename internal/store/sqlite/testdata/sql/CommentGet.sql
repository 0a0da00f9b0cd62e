SELECT id, issue_id, body, author_agent_id, author_board, run_id, created_at FROM comments WHERE id = :id
