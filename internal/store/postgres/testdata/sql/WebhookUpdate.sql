-- $1 = @url
-- $2 = @events
-- $3 = @format
-- $4 = @enabled
-- $5 = @secret
-- $6 = @id
UPDATE webhooks SET
	url = coalesce($1::text, url),
	events = coalesce($2::jsonb, events),
	format = coalesce($3::text, format),
	enabled = coalesce($4::boolean, enabled),
	secret = coalesce($5::text, secret),
	updated_at = now()
WHERE id = $6::text
RETURNING id, company_id, url, events::text, format, enabled, failing_since, created_at, updated_at
