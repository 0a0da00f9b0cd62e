-- $1 = @limit
SELECT i.id FROM issues i
WHERE (i.checkout_run_id IS NOT NULL OR i.execution_run_id IS NOT NULL)
	AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = i.checkout_run_id
		AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now())))
	AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = i.execution_run_id
		AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now())))
ORDER BY i.id
LIMIT $1::integer
FOR UPDATE OF i
