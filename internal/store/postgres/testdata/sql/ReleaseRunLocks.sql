-- $1 = @runs
-- $2 = @actor_type
-- $3 = @actor_id
-- $4 = @actor_run
-- $5 = @actor_request
-- $6 = @status
-- $7 = @finished
WITH lk AS MATERIALIZED (
	SELECT id, CASE WHEN checkout_run_id = ANY($1::text[]) THEN checkout_run_id ELSE execution_run_id END AS run_id
	FROM issues WHERE checkout_run_id = ANY($1::text[]) OR execution_run_id = ANY($1::text[])
	ORDER BY id FOR UPDATE -- in id order, as the sweeper: no deadlock between them
), rel AS (
	UPDATE issues i SET
		checkout_run_id = CASE WHEN i.checkout_run_id = ANY($1::text[]) THEN NULL ELSE i.checkout_run_id END,
		execution_run_id = CASE WHEN i.execution_run_id = ANY($1::text[]) THEN NULL ELSE i.execution_run_id END,
		execution_agent_name_key = CASE WHEN i.execution_run_id = ANY($1::text[]) THEN NULL ELSE i.execution_agent_name_key END,
		execution_locked_at = CASE WHEN i.execution_run_id = ANY($1::text[]) THEN NULL ELSE i.execution_locked_at END,
		updated_at = now()
	FROM lk WHERE i.id = lk.id AND (i.checkout_run_id = ANY($1::text[]) OR i.execution_run_id = ANY($1::text[]))
	RETURNING i.id, i.company_id, lk.run_id
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT company_id, $2::text, $3::text, $4::text, $5::text, action, entity_type, entity_id, details FROM (
		SELECT rel.run_id, 1 AS ord, rel.id AS entity_id, rel.company_id, 'issue.lock_released' AS action,
			'issue' AS entity_type, jsonb_build_object('runId', rel.run_id, 'runStatus', $6::text) AS details
		FROM rel
		UNION ALL
		SELECT r.id, 2, r.id, r.company_id, 'run.finished', 'run',
			jsonb_build_object('status', r.status, 'exitCode', r.exit_code, 'error', r.error)
			|| CASE WHEN r.error_code IS NOT NULL THEN jsonb_build_object('errorCode', r.error_code) ELSE '{}'::jsonb END
		FROM runs r WHERE r.id = ANY($1::text[]) AND $7::boolean
	) x ORDER BY run_id, ord, entity_id
)
SELECT count(*) FROM rel
