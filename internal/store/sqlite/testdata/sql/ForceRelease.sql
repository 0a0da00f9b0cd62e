UPDATE issues SET
	checkout_run_id = NULL,
	execution_run_id = NULL,
	execution_agent_name_key = NULL,
	execution_locked_at = NULL,
	status = CASE WHEN status = 'in_progress' THEN 'todo' ELSE status END,
	assignee_agent_id = CASE WHEN :clear_assignee THEN NULL ELSE assignee_agent_id END,
	updated_at = :now
WHERE id = :id
RETURNING id, company_id, identifier, title, description, status, priority, assignee_agent_id,
	checkout_run_id, checkout_epoch, execution_run_id, execution_agent_name_key, execution_locked_at,
	started_at, completed_at, cancelled_at, created_at, updated_at, parent_id, unresolved_blocker_count, completed_epoch, relation_count
