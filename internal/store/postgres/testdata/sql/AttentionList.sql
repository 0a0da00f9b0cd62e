-- $1 = @company
-- $2 = @limit
SELECT i.id, i.identifier, i.title, i.status, i.assignee_agent_id,
	CASE WHEN i.escalated_at IS NOT NULL THEN 'escalated' ELSE 'abandoned' END,
	coalesce(i.escalated_at, i.updated_at), i.run_failures, i.run_failure_log
FROM issues i
WHERE i.company_id = $1::text
	AND (i.escalated_at IS NOT NULL
		OR (i.status = 'in_progress'
			AND NOT EXISTS (SELECT 1 FROM runs r WHERE (r.id = i.checkout_run_id OR r.id = i.execution_run_id)
				AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now())))))
ORDER BY i.escalated_at IS NULL, coalesce(i.escalated_at, i.updated_at) DESC, i.id
LIMIT $2::int
