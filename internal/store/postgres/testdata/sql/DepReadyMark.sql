-- $1 = @id
-- $2 = @assignee
UPDATE issues SET ready_woken_generation = ready_generation
WHERE id = $1::text AND ready_woken_generation < ready_generation AND unresolved_blocker_count = 0
	AND assignee_agent_id IS NOT DISTINCT FROM $2::text
RETURNING company_id, identifier, status, ready_generation
