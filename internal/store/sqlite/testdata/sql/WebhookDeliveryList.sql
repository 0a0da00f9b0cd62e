SELECT id, webhook_id, company_id, activity_id, action, order_key, status, attempts,
	CASE WHEN status = 'pending' THEN next_attempt_at END, last_status, last_body, last_error, latency_ms,
	created_at, delivered_at, seq
FROM webhook_deliveries
WHERE webhook_id = :webhook AND (:before = 0 OR seq < :before)
ORDER BY seq DESC LIMIT :limit
