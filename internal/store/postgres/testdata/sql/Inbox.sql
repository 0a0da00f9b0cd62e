-- $1 = @agent
-- $2 = @limit
SELECT i.id, i.identifier, i.title, i.status, i.priority, i.updated_at, r.id, r.status,
	i.parent_id, i.unresolved_blocker_count,
	CASE WHEN i.unresolved_blocker_count > 0 THEN (SELECT string_agg(b.blocker_issue_id, ',')
		FROM issue_blockers b JOIN issues x ON x.id = b.blocker_issue_id
		WHERE b.issue_id = i.id AND x.status <> 'done') END
FROM issues i LEFT JOIN runs r ON r.id = i.execution_run_id
	AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()))
WHERE i.assignee_agent_id = $1::text AND i.status IN ('todo', 'in_progress', 'blocked')
ORDER BY i.priority_rank, i.created_at, i.id
LIMIT $2::integer
