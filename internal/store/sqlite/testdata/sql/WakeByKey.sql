SELECT id, status, run_id, blocked_by_run_id, request_hash, company_id FROM wake_requests
WHERE agent_id = :agent AND idempotency_key = :key
