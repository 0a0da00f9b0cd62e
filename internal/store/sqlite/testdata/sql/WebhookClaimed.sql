SELECT d.seq, d.id, d.webhook_id, d.attempts, d.retry_from, w.url, w.secret, w.format,
	a.id, a.company_id, a.actor_type, a.actor_id, a.run_id, a.action, a.entity_type, a.entity_id, a.details, a.created_at, a.request_id
FROM webhook_deliveries d
JOIN webhooks w ON w.id = d.webhook_id
JOIN activity a ON a.id = d.activity_id
WHERE d.claim = :claim AND d.status = 'pending'
ORDER BY d.seq
