INSERT INTO activity
	(company_id, actor_type, actor_id, run_id, action, entity_type, entity_id, details, created_at, request_id)
SELECT r.company_id, :actor_type, :actor_id, :actor_run, 'run.finished', 'run', r.id,
	json_insert(json_object('error', r.error),
		CASE WHEN r.error_code IS NOT NULL THEN '$.errorCode' END, r.error_code,
		'$.exitCode', r.exit_code,
		'$.status', r.status),
	:now, :actor_request
FROM runs r WHERE r.id = :run
