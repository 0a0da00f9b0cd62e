UPDATE issues SET status = :status, assignee_agent_id = :assignee, checkout_run_id = :checkout, execution_run_id = :execution,
	execution_agent_name_key = CASE WHEN :execution IS NULL THEN NULL
		ELSE (SELECT a.name_key FROM runs r JOIN agents a ON a.id = r.agent_id WHERE r.id = :execution) END,
	execution_locked_at = CASE WHEN :execution IS NULL THEN NULL ELSE :now END
WHERE id = :id
