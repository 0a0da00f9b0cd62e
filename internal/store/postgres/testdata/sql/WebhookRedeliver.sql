-- $1 = @id
UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = now(), retry_from = now(), delivered_at = NULL
WHERE id = $1::text
RETURNING id, webhook_id, company_id, activity_id, action, order_key, status, attempts,
	next_attempt_at, last_status, last_body, last_error, latency_ms, created_at, delivered_at, seq
