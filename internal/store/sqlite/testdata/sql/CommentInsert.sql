INSERT INTO comments (id, company_id, issue_id, body, author_agent_id, author_board, run_id, seq, created_at)
SELECT :id, i.company_id, i.id, :body, :author, :board, :actor_run,
	(SELECT coalesce(max(c.seq), 0) + 1 FROM comments c WHERE c.issue_id = i.id), :now
FROM issues i
WHERE (i.id = :rid OR i.identifier = :rident) AND (:company = '' OR i.company_id = :company)
RETURNING id, issue_id, body, author_agent_id, author_board, run_id, created_at, company_id
