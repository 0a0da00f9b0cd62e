-- $1 = @agent
UPDATE runs SET status = 'cancelled', error_code = 'agent_paused', error = 'the agent was paused', finished_at = now()
WHERE agent_id = $1::text AND status = 'queued'
RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at
