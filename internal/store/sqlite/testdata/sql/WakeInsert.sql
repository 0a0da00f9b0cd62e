INSERT INTO wake_requests (id, company_id, agent_id, issue_id, reason, idempotency_key,
	status, run_id, blocked_by_run_id, created_at, updated_at, request_hash)
VALUES (:id, :company, :agent, :issue, :reason, :key, :status, :run, :blocked_by, :now, :now, :hash)
