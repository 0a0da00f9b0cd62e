SELECT DISTINCT w.blocked_by_run_id FROM wake_requests w
WHERE w.status = 'deferred' AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = w.blocked_by_run_id
	AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now)))
