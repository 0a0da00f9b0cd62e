-- $1 = @limit
WITH cand AS MATERIALIZED (
	SELECT id FROM runs WHERE status = 'running' AND lease_expires_at <= now()
	ORDER BY id LIMIT $1::integer
	FOR UPDATE
), lost AS (
	UPDATE runs r SET
		status = 'failed',
		error_code = 'lease_expired',
		error = coalesce(r.error, 'lease expired: no sign of life before the lease ran out'),
		finished_at = now()
	FROM cand WHERE r.id = cand.id AND r.status = 'running' AND r.lease_expires_at <= now()
	RETURNING r.id, r.company_id, r.agent_id, r.lease_expires_at
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT company_id, 'system', 'system', NULL, NULL, 'run.lost', 'run', id,
		jsonb_build_object('agentId', agent_id, 'errorCode', 'lease_expired',
			'leaseExpiresAt', to_char(lease_expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
	FROM lost ORDER BY id
)
SELECT count(*) FROM lost
