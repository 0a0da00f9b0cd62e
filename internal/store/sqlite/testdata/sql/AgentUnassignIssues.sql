UPDATE issues SET
	assignee_agent_id = NULL,
	status = CASE WHEN status = 'in_progress' THEN 'todo' ELSE status END,
	checkout_run_id = NULL,
	execution_run_id = NULL,
	execution_agent_name_key = NULL,
	execution_locked_at = NULL,
	updated_at = :now
WHERE assignee_agent_id = :agent AND status NOT IN ('done', 'cancelled')
