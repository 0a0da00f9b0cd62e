-- $1 = @id
-- $2 = @agent
UPDATE runs r SET
	status = 'cancelled',
	error_code = 'key_revoked',
	error = coalesce(r.error, 'the API key it was opened with was revoked'),
	finished_at = now()
WHERE r.key_hash = (SELECT token_hash FROM agent_api_keys WHERE id = $1::text AND agent_id = $2::text AND revoked_at IS NULL)
	AND r.status IN ('queued', 'running')
RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at
