-- $1 = @error
-- $2 = @run
-- $3 = @host
-- $4 = @retry_id
WITH lost AS (
	UPDATE runs SET status = 'failed', error_code = 'process_lost', error = $1::text, finished_at = now()
	WHERE id = $2::text AND status = 'running' AND managed AND host_id = $3::text
	RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
		lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at
), held AS (
	SELECT i.id FROM issues i, lost WHERE i.execution_run_id = $2::text
	ORDER BY (i.id = lost.issue_id) DESC NULLS LAST, i.execution_locked_at DESC, i.id LIMIT 1
), retry AS (
	INSERT INTO runs (id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, managed, created_at)
	SELECT $4::text, company_id, agent_id, 'queued', 'retry', coalesce((SELECT id FROM held), issue_id), id, 2, true,
		clock_timestamp()
	FROM lost WHERE attempt = 1 AND retry_of_run_id IS NULL
	ON CONFLICT DO NOTHING
	RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
		lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at
), moved AS (
	UPDATE issues i SET
		execution_run_id = (SELECT id FROM retry),
		execution_locked_at = now(),
		checkout_run_id = CASE WHEN i.checkout_run_id = $2::text THEN NULL ELSE i.checkout_run_id END,
		updated_at = now()
	WHERE i.id = (SELECT id FROM held) AND i.execution_run_id = $2::text AND EXISTS (SELECT 1 FROM retry)
	RETURNING i.id, i.company_id
)
SELECT (SELECT row_to_json(lost) FROM lost), (SELECT row_to_json(retry) FROM retry),
	(SELECT coalesce(json_agg(json_build_array(id, company_id)), '[]') FROM moved)
