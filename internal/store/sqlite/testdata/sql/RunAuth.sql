SELECT r.id, r.company_id, r.agent_id, r.status, r.invocation_source, r.issue_id, r.retry_of_run_id, r.attempt, r.pid,
	r.host_id, r.lease_expires_at, r.last_sign_of_life_at, r.started_at, r.finished_at, r.exit_code, r.error_code, r.error,
	r.created_at,
	(r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now)),
	a.id, a.company_id, a.name, a.name_key, a.role, a.status, a.created_at, a.last_heartbeat_at
FROM runs r JOIN agents a ON a.id = r.agent_id WHERE r.token_hash = :hash
