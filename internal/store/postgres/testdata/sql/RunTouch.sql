-- $1 = @ttl_us
-- $2 = @run
-- $3 = @agent
WITH upd AS (
	UPDATE runs r SET
		lease_expires_at = now() + $1::bigint * interval '1 microsecond',
		last_sign_of_life_at = now()
	WHERE r.id = $2::text AND r.agent_id = $3::text
		AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()))
	RETURNING r.id, r.company_id, r.agent_id, r.status, r.invocation_source, r.issue_id, r.retry_of_run_id, r.attempt, r.pid,
		r.host_id, r.lease_expires_at, r.last_sign_of_life_at, r.started_at, r.finished_at, r.exit_code, r.error_code, r.error,
		r.created_at
), hb AS (
	UPDATE agents SET last_heartbeat_at = now() WHERE id IN (SELECT agent_id FROM upd)
)
SELECT * FROM upd
