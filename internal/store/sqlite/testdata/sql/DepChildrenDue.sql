SELECT i.id, i.assignee_agent_id FROM issues i
WHERE i.children_woken_generation < i.children_generation AND i.open_child_count = 0
ORDER BY i.id LIMIT :limit
