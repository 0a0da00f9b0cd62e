UPDATE webhooks SET
	url = coalesce(:url, url),
	events = coalesce(:events, events),
	format = coalesce(:format, format),
	enabled = coalesce(:enabled, enabled),
	secret = coalesce(:secret, secret),
	updated_at = :now
WHERE id = :id
RETURNING id, company_id, url, events, format, enabled, failing_since, created_at, updated_at
