-- $1 = @rid
-- $2 = @rident
-- $3 = @company
SELECT id, company_id, identifier, title, description, status, priority, assignee_agent_id,
	checkout_run_id, checkout_epoch, execution_run_id, execution_agent_name_key, execution_locked_at,
	started_at, completed_at, cancelled_at, created_at, updated_at, parent_id, unresolved_blocker_count, completed_epoch, relation_count
FROM issues i
WHERE i.id = coalesce(nullif($1::text, ''), (SELECT ref.id FROM issues ref WHERE ref.identifier = $2::text)) AND ($3::text = '' OR i.company_id IS NOT DISTINCT FROM $3::text)
