-- $1 = @company
SELECT id, company_id, url, events::text, format, enabled, failing_since, created_at, updated_at
FROM webhooks WHERE company_id = $1::text ORDER BY created_at, id
