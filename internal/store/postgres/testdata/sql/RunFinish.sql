-- $1 = @status
-- $2 = @exit_code
-- $3 = @error
-- $4 = @error_code
-- $5 = @run
-- $6 = @board
-- $7 = @agent
-- $8 = @company
UPDATE runs r SET
	status = $1::text,
	finished_at = now(),
	exit_code = $2::integer,
	error = $3::text,
	error_code = $4::text
WHERE r.id = $5::text AND r.status IN ('queued', 'running')
	-- L6: the board, or the run's own agent while the run is live
	AND ($6::boolean OR (r.agent_id = $7::text AND r.company_id = $8::text
		AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()))))
RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at
