-- $1 = @limit
-- $2 = @lease_us
-- $3 = @claim
WITH due AS (
	SELECT d.seq FROM webhook_deliveries d
	WHERE d.status = 'pending' AND d.next_attempt_at <= now()
		AND (d.claimed_until IS NULL OR d.claimed_until <= now())
		AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e
			WHERE e.webhook_id = d.webhook_id AND e.order_key = d.order_key AND e.status = 'pending' AND e.seq < d.seq)
	ORDER BY d.seq
	LIMIT $1::int
	FOR UPDATE OF d SKIP LOCKED
)
UPDATE webhook_deliveries d SET claimed_until = now() + $2::bigint * interval '1 microsecond',
	claim = $3::text, attempts = d.attempts + 1
FROM due WHERE d.seq = due.seq
