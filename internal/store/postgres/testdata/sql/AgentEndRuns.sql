-- $1 = @agent
UPDATE runs r SET
	status = 'cancelled',
	error_code = 'agent_terminated',
	error = coalesce(r.error, 'agent terminated'),
	finished_at = now()
WHERE r.agent_id = $1::text AND r.status IN ('queued', 'running')
RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at
