INSERT INTO runs (id, company_id, agent_id, status, invocation_source, issue_id, attempt,
	lease_expires_at, last_sign_of_life_at, started_at, token_hash, key_hash, created_at)
SELECT :id, a.company_id, a.id, 'running', :source, i.id, 1, :now + :ttl_us, :now, :now, :token_hash, :key_hash, :now
FROM agents a LEFT JOIN issues i ON :issue_ref <> '' AND i.company_id = a.company_id
	AND (i.id = :rid OR i.identifier = :rident)
WHERE a.id = :agent AND a.status <> 'terminated' AND (:issue_ref = '' OR i.id IS NOT NULL)
	AND (:max_live <= 0 OR (SELECT count(*) FROM runs r WHERE r.agent_id = :agent
		AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now))) < :max_live)
RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at
