UPDATE webhook_deliveries SET status = 'delivered', delivered_at = :now, claimed_until = NULL, claim = NULL,
	last_status = :status, last_body = :body, last_error = NULL, latency_ms = :latency
WHERE seq = :seq AND claim = :claim
