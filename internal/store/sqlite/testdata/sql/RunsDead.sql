SELECT u.value FROM json_each(:runs) u WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = u.value
	AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now)))
