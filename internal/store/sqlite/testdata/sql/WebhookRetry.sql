UPDATE webhook_deliveries SET next_attempt_at = :now + :delay_us, claimed_until = NULL, claim = NULL,
	last_status = :status, last_body = :body, last_error = :error, latency_ms = :latency
WHERE seq = :seq AND claim = :claim AND :now + :delay_us <= retry_from + :max_age_us
