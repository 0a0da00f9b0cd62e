UPDATE webhook_deliveries SET status = 'failed', claimed_until = NULL, claim = NULL,
	last_status = :status, last_body = :body, last_error = :error, latency_ms = :latency
WHERE seq = :seq AND claim = :claim
