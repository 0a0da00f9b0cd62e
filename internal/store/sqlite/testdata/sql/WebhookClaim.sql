UPDATE webhook_deliveries SET claimed_until = :now + :lease_us, claim = :claim, attempts = attempts + 1
WHERE seq IN (
	SELECT d.seq FROM webhook_deliveries d
	WHERE d.status = 'pending' AND d.next_attempt_at <= :now
		AND (d.claimed_until IS NULL OR d.claimed_until <= :now)
		AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e
			WHERE e.webhook_id = d.webhook_id AND e.order_key = d.order_key AND e.status = 'pending' AND e.seq < d.seq)
	ORDER BY d.seq
	LIMIT :limit)
