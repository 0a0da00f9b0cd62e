UPDATE runs SET
	status = 'failed', error_code = 'process_lost', error = :error, finished_at = :now
WHERE id = :run AND status = 'running' AND managed = 1 AND host_id = :host
RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at
