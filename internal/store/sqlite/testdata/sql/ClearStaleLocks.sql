UPDATE issues SET
	checkout_run_id = NULL,
	execution_run_id = NULL,
	execution_agent_name_key = NULL,
	execution_locked_at = NULL,
	updated_at = :now
WHERE id = :id
	AND checkout_run_id IS :old_checkout AND execution_run_id IS :old_execution
	-- sweeper: the issue is locked, and no lock column names a live run
	AND (checkout_run_id IS NOT NULL OR execution_run_id IS NOT NULL)
	AND (checkout_run_id IS NULL OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = issues.checkout_run_id
		AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now))))
	AND (execution_run_id IS NULL OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = issues.execution_run_id
		AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now))))
