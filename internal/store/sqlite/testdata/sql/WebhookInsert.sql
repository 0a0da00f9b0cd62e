INSERT INTO webhooks (id, company_id, url, events, secret, format, enabled, created_at, updated_at)
VALUES (:id, :company, :url, :events, :secret, :format, :enabled, :now, :now)
RETURNING id, company_id, url, events, format, enabled, failing_since, created_at, updated_at
