UPDATE issues SET
	checkout_run_id = CASE WHEN checkout_run_id = :run THEN NULL ELSE checkout_run_id END,
	execution_run_id = CASE WHEN execution_run_id = :run THEN NULL ELSE execution_run_id END,
	execution_agent_name_key = CASE WHEN execution_run_id = :run THEN NULL ELSE execution_agent_name_key END,
	execution_locked_at = CASE WHEN execution_run_id = :run THEN NULL ELSE execution_locked_at END,
	updated_at = :now
WHERE execution_run_id = :run
RETURNING id
