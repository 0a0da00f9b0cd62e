SELECT id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at
FROM runs WHERE id = :run AND agent_id = :agent AND (status = 'queued' OR (status = 'running' AND lease_expires_at > :now)) AND last_sign_of_life_at > :now - :min_us
