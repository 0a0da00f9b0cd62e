-- $1 = @host
-- $2 = @hash
-- $3 = @ttl_us
-- $4 = @run
-- $5 = @max
UPDATE runs r SET
	status = 'running', host_id = $1::text, token_hash = $2::text, started_at = now(),
	lease_expires_at = now() + $3::bigint * interval '1 microsecond', last_sign_of_life_at = now()
WHERE r.id = $4::text AND r.status = 'queued'
	AND EXISTS (SELECT 1 FROM agents a WHERE a.id = r.agent_id AND a.status = 'active')
	AND (SELECT count(*) FROM runs r2 WHERE r2.agent_id = r.agent_id AND r2.status = 'running' AND r2.lease_expires_at > now()) < $5::integer
RETURNING r.id, r.company_id, r.agent_id, r.status, r.invocation_source, r.issue_id, r.retry_of_run_id, r.attempt, r.pid,
	r.host_id, r.lease_expires_at, r.last_sign_of_life_at, r.started_at, r.finished_at, r.exit_code, r.error_code, r.error,
	r.created_at
