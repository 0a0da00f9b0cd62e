-- $1 = @run
-- $2 = @ttl_us
-- $3 = @agent
-- $4 = @force
-- $5 = @min_us
WITH cur AS (
	SELECT r.id, r.company_id, r.agent_id, r.status, r.invocation_source, r.issue_id, r.retry_of_run_id, r.attempt, r.pid,
		r.host_id, r.lease_expires_at, r.last_sign_of_life_at, r.started_at, r.finished_at, r.exit_code, r.error_code, r.error,
		r.created_at,
		CASE
			WHEN r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()) THEN 'live'
			WHEN r.status = 'running' THEN 'lost' ELSE 'terminal' END AS state
	FROM runs r WHERE r.id = $1::text
), upd AS (
	UPDATE runs r SET
		lease_expires_at = now() + $2::bigint * interval '1 microsecond',
		last_sign_of_life_at = now()
	WHERE r.id = $1::text AND r.agent_id = $3::text
		AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()))
		AND ($4::boolean OR r.last_sign_of_life_at IS NULL
			OR r.last_sign_of_life_at <= now() - $5::bigint * interval '1 microsecond')
	RETURNING r.id, r.company_id, r.agent_id, r.status, r.invocation_source, r.issue_id, r.retry_of_run_id, r.attempt, r.pid,
		r.host_id, r.lease_expires_at, r.last_sign_of_life_at, r.started_at, r.finished_at, r.exit_code, r.error_code, r.error,
		r.created_at
), hb AS (
	UPDATE agents SET last_heartbeat_at = now() WHERE id IN (SELECT agent_id FROM upd)
)
SELECT upd.*, true, 'live' FROM upd
UNION ALL
SELECT cur.id, cur.company_id, cur.agent_id, cur.status, cur.invocation_source, cur.issue_id, cur.retry_of_run_id, cur.attempt,
	cur.pid, cur.host_id, cur.lease_expires_at, cur.last_sign_of_life_at, cur.started_at, cur.finished_at, cur.exit_code,
	cur.error_code, cur.error, cur.created_at, false, cur.state
FROM cur WHERE NOT EXISTS (SELECT 1 FROM upd)
