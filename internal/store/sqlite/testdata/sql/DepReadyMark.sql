UPDATE issues SET ready_woken_generation = ready_generation
WHERE id = :id AND ready_woken_generation < ready_generation AND unresolved_blocker_count = 0
	AND assignee_agent_id IS :assignee
RETURNING company_id, identifier, status, ready_generation
