UPDATE runs SET
	status = :status,
	finished_at = :now,
	exit_code = :exit_code,
	error = :error,
	error_code = :error_code
WHERE id = :run AND status IN ('queued', 'running')
	-- L6: the board, or the run's own agent while the run is live
	AND (:board OR (agent_id = :agent AND company_id = :company
		AND (status = 'queued' OR (status = 'running' AND lease_expires_at > :now))))
RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at
