-- $1 = @status
-- $2 = @body
-- $3 = @latency
-- $4 = @seq
-- $5 = @claim
UPDATE webhook_deliveries SET status = 'delivered', delivered_at = now(), claimed_until = NULL, claim = NULL,
	last_status = $1::int, last_body = $2::text, last_error = NULL, latency_ms = $3::int
WHERE seq = $4::bigint AND claim = $5::text
