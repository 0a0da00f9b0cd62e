SELECT i.id, i.identifier, i.title, i.status, i.priority, i.updated_at, r.id, r.status
FROM issues i LEFT JOIN runs r ON r.id = i.execution_run_id
	AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now))
WHERE i.assignee_agent_id = :agent AND i.status IN ('todo', 'in_progress', 'blocked')
ORDER BY i.priority_rank, i.created_at, i.id
LIMIT :limit
