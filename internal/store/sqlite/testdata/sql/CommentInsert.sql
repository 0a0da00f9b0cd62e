INSERT INTO comments (id, company_id, issue_id, body, author_agent_id, author_board, run_id, seq, created_at)
VALUES (:id, :company, :issue, :body, :author, :board, :run,
	(SELECT coalesce(max(seq), 0) + 1 FROM comments WHERE issue_id = :issue), :now)
RETURNING id, issue_id, body, author_agent_id, author_board, run_id, created_at
