SELECT k.id, k.last_used_at IS NULL OR k.last_used_at <= :now - 60000000,
	a.id, a.company_id, a.name, a.name_key, a.role, a.status, a.created_at, a.last_heartbeat_at,
	r.id IS NOT NULL, coalesce(r.id, ''), coalesce(r.company_id, ''), coalesce(r.agent_id, ''), coalesce(r.status, ''),
	coalesce(r.invocation_source, ''), r.issue_id, r.retry_of_run_id, coalesce(r.attempt, 0), r.pid, r.host_id,
	r.lease_expires_at, r.last_sign_of_life_at, r.started_at, r.finished_at, r.exit_code, r.error_code, r.error,
	coalesce(r.created_at, 0)
FROM agent_api_keys k JOIN agents a ON a.id = k.agent_id
	LEFT JOIN runs r ON r.id = :run AND r.agent_id = a.id
		AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now))
		AND :min_us > 0 AND r.last_sign_of_life_at > :now - :min_us
WHERE k.token_hash = :hash AND k.revoked_at IS NULL
