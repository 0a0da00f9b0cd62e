-- $1 = @limit
SELECT id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at,
	coalesce(proc_start, 0)
FROM runs WHERE status = 'queued' AND managed
	AND agent_id IN (SELECT id FROM agents WHERE status = 'active' AND adapter_config IS NOT NULL)
ORDER BY created_at, id LIMIT $1::integer
