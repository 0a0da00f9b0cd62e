-- $1 = @delay_us
-- $2 = @status
-- $3 = @body
-- $4 = @error
-- $5 = @latency
-- $6 = @seq
-- $7 = @claim
-- $8 = @max_age_us
UPDATE webhook_deliveries SET next_attempt_at = now() + $1::bigint * interval '1 microsecond',
	claimed_until = NULL, claim = NULL,
	last_status = $2::int, last_body = $3::text, last_error = $4::text, latency_ms = $5::int
WHERE seq = $6::bigint AND claim = $7::text
	AND now() + $1::bigint * interval '1 microsecond' <= retry_from + $8::bigint * interval '1 microsecond'
