-- $1 = @runs
SELECT u.id FROM unnest($1::text[]) AS u(id) WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = u.id
	AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now())))
