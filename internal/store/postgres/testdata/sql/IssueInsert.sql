-- $1 = @company
-- $2 = @assignee
-- $3 = @id
-- $4 = @title
-- $5 = @description
-- $6 = @status
-- $7 = @priority
-- $8 = @priority_rank
-- $9 = @idem_actor
-- $10 = @idem_key
-- $11 = @idem_hash
-- $12 = @idem_type
-- $13 = @actor_type
-- $14 = @actor_id
-- $15 = @actor_run
-- $16 = @actor_request
WITH c AS (
	UPDATE companies SET issue_counter = issue_counter + 1
	WHERE id = $1::text
		AND ($2::text IS NULL OR EXISTS (SELECT 1 FROM agents a
			WHERE a.id = $2::text AND a.company_id = $1::text AND a.status <> 'terminated'))
	RETURNING id, issue_prefix, issue_counter
), made AS (
	INSERT INTO issues (id, company_id, identifier, title, description, status, priority, priority_rank,
		assignee_agent_id, started_at, completed_at, cancelled_at, created_at, updated_at)
	SELECT $3::text, c.id, c.issue_prefix || '-' || c.issue_counter, $4::text, $5::text, $6::text,
		$7::text, $8::integer, $2::text,
		CASE WHEN $6::text = 'in_progress' THEN now() END,
		CASE WHEN $6::text = 'done' THEN now() END,
		CASE WHEN $6::text = 'cancelled' THEN now() END,
		now(), now()
	FROM c
	RETURNING id, company_id, identifier, title, description, status, priority, assignee_agent_id,
		checkout_run_id, checkout_epoch, execution_run_id, execution_agent_name_key, execution_locked_at,
		started_at, completed_at, cancelled_at, created_at, updated_at, parent_id, unresolved_blocker_count, completed_epoch, relation_count
), rec AS (
	INSERT INTO idempotency_keys (actor_id, key, request_hash, resource_type, resource_id, created_at)
	SELECT $9::text, $10::text, $11::text, $12::text, made.id, now()
	FROM made WHERE $10::text IS NOT NULL
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT made.company_id, $13::text, $14::text, $15::text, $16::text, 'issue.created', 'issue', made.id,
		jsonb_build_object('identifier', made.identifier, 'title', made.title, 'status', made.status,
			'priority', made.priority, 'assigneeAgentId', made.assignee_agent_id) FROM made
)
SELECT id, company_id, identifier, title, description, status, priority, assignee_agent_id,
	checkout_run_id, checkout_epoch, execution_run_id, execution_agent_name_key, execution_locked_at,
	started_at, completed_at, cancelled_at, created_at, updated_at, parent_id, unresolved_blocker_count, completed_epoch, relation_count
FROM made
