-- $1 = @status
-- $2 = @body
-- $3 = @error
-- $4 = @latency
-- $5 = @seq
-- $6 = @claim
UPDATE webhook_deliveries SET status = 'failed', claimed_until = NULL, claim = NULL,
	last_status = $1::int, last_body = $2::text, last_error = $3::text, latency_ms = $4::int
WHERE seq = $5::bigint AND claim = $6::text
