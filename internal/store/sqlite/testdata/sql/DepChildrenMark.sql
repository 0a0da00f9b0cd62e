UPDATE issues SET children_woken_generation = children_generation
WHERE id = :id AND children_woken_generation < children_generation AND open_child_count = 0
	AND assignee_agent_id IS :assignee
RETURNING company_id, identifier, status, children_generation
