-- $1 = @ids
WITH old AS MATERIALIZED (
	SELECT i.id, i.company_id, i.checkout_run_id, i.execution_run_id,
		CASE WHEN i.checkout_run_id IS NOT NULL THEN coalesce((SELECT CASE
			WHEN r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()) THEN 'live'
			WHEN r.status = 'running' THEN 'lost' ELSE 'terminal' END FROM runs r WHERE r.id = i.checkout_run_id), 'missing') END AS c_state,
		CASE WHEN i.execution_run_id IS NOT NULL THEN coalesce((SELECT CASE
			WHEN r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()) THEN 'live'
			WHEN r.status = 'running' THEN 'lost' ELSE 'terminal' END FROM runs r WHERE r.id = i.execution_run_id), 'missing') END AS e_state
	FROM issues i WHERE i.id = ANY($1::text[])
), upd AS (
	UPDATE issues i SET
		checkout_run_id = NULL,
		execution_run_id = NULL,
		execution_agent_name_key = NULL,
		execution_locked_at = NULL,
		updated_at = now()
	FROM old o
	WHERE i.id = o.id
		-- sweeper: the issue is locked, and no lock column names a live run
		AND (o.checkout_run_id IS NOT NULL OR o.execution_run_id IS NOT NULL)
		AND coalesce(o.c_state, '') <> 'live' AND coalesce(o.e_state, '') <> 'live'
	RETURNING o.id, o.company_id, o.checkout_run_id, o.execution_run_id,
		CASE WHEN o.checkout_run_id IS NOT NULL THEN o.c_state ELSE o.e_state END AS why
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT company_id, 'system', 'system', NULL, NULL, 'issue.stale_lock_cleared', 'issue', id,
		jsonb_build_object('clearedCheckoutRunId', checkout_run_id, 'clearedExecutionRunId', execution_run_id, 'why', why)
	FROM upd ORDER BY id
)
SELECT count(*) FROM upd
