INSERT INTO issues (id, company_id, identifier, title, description, status, priority, priority_rank,
	assignee_agent_id, started_at, completed_at, cancelled_at, created_at, updated_at)
SELECT :id, c.id, c.issue_prefix || '-' || c.issue_counter, :title, :description, :status, :priority, :priority_rank,
	:assignee, CASE WHEN :status = 'in_progress' THEN :now END, CASE WHEN :status = 'done' THEN :now END,
	CASE WHEN :status = 'cancelled' THEN :now END, :now, :now
FROM companies c
WHERE c.id = :company AND (:assignee IS NULL OR EXISTS (SELECT 1 FROM agents a
	WHERE a.id = :assignee AND a.company_id = :company AND a.status <> 'terminated'))
RETURNING id, company_id, identifier, title, description, status, priority, assignee_agent_id,
	checkout_run_id, checkout_epoch, execution_run_id, execution_agent_name_key, execution_locked_at,
	started_at, completed_at, cancelled_at, created_at, updated_at, parent_id, unresolved_blocker_count, completed_epoch, relation_count
