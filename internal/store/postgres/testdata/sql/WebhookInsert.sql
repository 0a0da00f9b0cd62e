-- $1 = @id
-- $2 = @company
-- $3 = @url
-- $4 = @events
-- $5 = @secret
-- $6 = @format
-- $7 = @enabled
INSERT INTO webhooks (id, company_id, url, events, secret, format, enabled, created_at, updated_at)
VALUES ($1::text, $2::text, $3::text, $4::jsonb, $5::text, $6::text, $7::boolean, now(), now())
RETURNING id, company_id, url, events::text, format, enabled, failing_since, created_at, updated_at
