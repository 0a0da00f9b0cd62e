SELECT (extract(epoch FROM min(greatest(d.next_attempt_at, coalesce(d.claimed_until, d.next_attempt_at))) - now()) * 1000000)::bigint
FROM webhook_deliveries d
WHERE d.status = 'pending'
	AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e
		WHERE e.webhook_id = d.webhook_id AND e.order_key = d.order_key AND e.status = 'pending' AND e.seq < d.seq)
