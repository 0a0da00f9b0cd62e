-- $1 = @limit
SELECT i.id, i.assignee_agent_id FROM issues i
WHERE i.ready_woken_generation < i.ready_generation AND i.unresolved_blocker_count = 0
ORDER BY i.id LIMIT $1::integer
