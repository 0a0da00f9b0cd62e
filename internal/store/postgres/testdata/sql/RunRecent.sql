-- $1 = @run
-- $2 = @agent
-- $3 = @min_us
SELECT id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at
FROM runs WHERE id = $1::text AND agent_id = $2::text AND (status = 'queued' OR (status = 'running' AND lease_expires_at > now()))
	AND last_sign_of_life_at > now() - $3::bigint * interval '1 microsecond'
