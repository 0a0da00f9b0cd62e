SELECT id, company_id, url, events, format, enabled, failing_since, created_at, updated_at
FROM webhooks WHERE id = :id
