-- $1 = @id
SELECT id, company_id, url, events::text, format, enabled, failing_since, created_at, updated_at
FROM webhooks WHERE id = $1::text
