-- $1 = @webhook
-- $2 = @before
-- $3 = @limit
SELECT id, webhook_id, company_id, activity_id, action, order_key, status, attempts,
	CASE WHEN status = 'pending' THEN next_attempt_at END, last_status, last_body, last_error, latency_ms,
	created_at, delivered_at, seq
FROM webhook_deliveries
WHERE webhook_id = $1::text AND ($2::bigint = 0 OR seq < $2::bigint)
ORDER BY seq DESC LIMIT $3::int
