-- $1 = @id
-- $2 = @company
-- $3 = @agent
-- $4 = @source
-- $5 = @issue
-- $6 = @retry_of
-- $7 = @attempt
INSERT INTO runs (id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id,
	attempt, managed, created_at)
VALUES ($1::text, $2::text, $3::text, 'queued', $4::text, $5::text, $6::text, $7::integer,
	true, clock_timestamp())
ON CONFLICT DO NOTHING
RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at
