-- $1 = @agent
-- $2 = @key
SELECT id, status, run_id, blocked_by_run_id, request_hash, company_id FROM wake_requests
WHERE agent_id = $1::text AND idempotency_key = $2::text
