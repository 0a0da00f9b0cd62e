UPDATE runs SET
	status = 'running', host_id = :host, token_hash = :hash, started_at = :now,
	lease_expires_at = :now + :ttl_us, last_sign_of_life_at = :now
WHERE id = :run AND status = 'queued'
	AND EXISTS (SELECT 1 FROM agents a WHERE a.id = runs.agent_id AND a.status = 'active')
	AND (SELECT count(*) FROM runs r2 WHERE r2.agent_id = runs.agent_id AND r2.status = 'running' AND r2.lease_expires_at > :now) < :max
RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at
