-- $1 = @id
-- $2 = @assignee
UPDATE issues SET children_woken_generation = children_generation
WHERE id = $1::text AND children_woken_generation < children_generation AND open_child_count = 0
	AND assignee_agent_id IS NOT DISTINCT FROM $2::text
RETURNING company_id, identifier, status, children_generation
