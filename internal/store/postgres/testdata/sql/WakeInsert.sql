-- $1 = @id
-- $2 = @company
-- $3 = @agent
-- $4 = @issue
-- $5 = @reason
-- $6 = @key
-- $7 = @status
-- $8 = @run
-- $9 = @blocked_by
-- $10 = @hash
INSERT INTO wake_requests (id, company_id, agent_id, issue_id, reason, idempotency_key,
	status, run_id, blocked_by_run_id, request_hash)
VALUES ($1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text, $8::text,
	$9::text, $10::text)
