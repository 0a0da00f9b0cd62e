-- Issues: creation with its per-company identifier, reads, the inbox.

-- name: IssueInsert
-- Hands out the company's next issue number and inserts the issue, with
-- its issue.created row, in one statement. The counter UPDATE takes the
-- company's row lock, which serialises concurrent creators on every replica
-- until they commit, and rolls back with a failed create: identifiers
-- PREFIX-N are gapless and never repeat. With an Idempotency-Key
-- (@idem_key) it records it (CTE rec; a record in force that committed
-- since the lookup makes the whole statement fail on the primary key). No
-- row when the company is missing or @assignee is no active agent of it.
WITH c AS (
	UPDATE companies SET issue_counter = issue_counter + 1
	WHERE id = @company::text
		AND (@assignee::text IS NULL OR EXISTS (SELECT 1 FROM agents a
			WHERE a.id = @assignee::text AND a.company_id = @company::text AND a.status <> 'terminated'))
	RETURNING id, issue_prefix, issue_counter
), made AS (
	INSERT INTO issues (id, company_id, identifier, title, description, status, priority, priority_rank,
		assignee_agent_id, started_at, completed_at, cancelled_at, created_at, updated_at)
	SELECT @id::text, c.id, c.issue_prefix || '-' || c.issue_counter, @title::text, @description::text, @status::text,
		@priority::text, @priority_rank::integer, @assignee::text,
		CASE WHEN @status::text = 'in_progress' THEN now() END,
		CASE WHEN @status::text = 'done' THEN now() END,
		CASE WHEN @status::text = 'cancelled' THEN now() END,
		now(), now()
	FROM c
	RETURNING id, company_id, identifier, title, description, status, priority, assignee_agent_id,
		checkout_run_id, checkout_epoch, execution_run_id, execution_agent_name_key, execution_locked_at,
		started_at, completed_at, cancelled_at, created_at, updated_at, parent_id, unresolved_blocker_count, completed_epoch, relation_count
), rec AS (
	INSERT INTO idempotency_keys (actor_id, key, request_hash, resource_type, resource_id, created_at)
	SELECT @idem_actor::text, @idem_key::text, @idem_hash::text, @idem_type::text, made.id, now()
	FROM made WHERE @idem_key::text IS NOT NULL
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT made.company_id, @actor_type::text, @actor_id::text, @actor_run::text, @actor_request::text, 'issue.created', 'issue', made.id,
		jsonb_build_object('identifier', made.identifier, 'title', made.title, 'status', made.status,
			'priority', made.priority, 'assigneeAgentId', made.assignee_agent_id) FROM made
)
SELECT id, company_id, identifier, title, description, status, priority, assignee_agent_id,
	checkout_run_id, checkout_epoch, execution_run_id, execution_agent_name_key, execution_locked_at,
	started_at, completed_at, cancelled_at, created_at, updated_at, parent_id, unresolved_blocker_count, completed_epoch, relation_count
FROM made

-- name: IssueGet
-- The issue by UUID @rid or identifier @rident, within @company ('' for any),
-- found by primary key whatever the statistics (the company condition is
-- never an index condition; lock.sql says why).
SELECT id, company_id, identifier, title, description, status, priority, assignee_agent_id,
	checkout_run_id, checkout_epoch, execution_run_id, execution_agent_name_key, execution_locked_at,
	started_at, completed_at, cancelled_at, created_at, updated_at, parent_id, unresolved_blocker_count, completed_epoch, relation_count
FROM issues i
WHERE i.id = coalesce(nullif(@rid::text, ''), (SELECT ref.id FROM issues ref WHERE ref.identifier = @rident::text)) AND (@company::text = '' OR i.company_id IS NOT DISTINCT FROM @company::text)

-- name: Inbox
-- The open issues of agent @agent, most urgent first, with the live run
-- holding each one's execution lock, if any, its parent and its
-- readiness (D9: the count and the ids of its blockers not done, comma
-- separated).
SELECT i.id, i.identifier, i.title, i.status, i.priority, i.updated_at, r.id, r.status,
	i.parent_id, i.unresolved_blocker_count,
	CASE WHEN i.unresolved_blocker_count > 0 THEN (SELECT string_agg(b.blocker_issue_id, ',')
		FROM issue_blockers b JOIN issues x ON x.id = b.blocker_issue_id
		WHERE b.issue_id = i.id AND x.status <> 'done') END
FROM issues i LEFT JOIN runs r ON r.id = i.execution_run_id
	AND ({{run_live r}})
WHERE i.assignee_agent_id = @agent::text AND i.status IN ('todo', 'in_progress', 'blocked')
ORDER BY i.priority_rank, i.created_at, i.id
LIMIT @limit::integer
