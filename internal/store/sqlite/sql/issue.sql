-- Issues: creation with its per-company identifier, reads, the inbox.
-- Times are unix microseconds (:now is the transaction's time).

-- name: NextIdentifier
-- Hands out company :company's next issue number inside the creating
-- transaction, just before IssueInsert takes it: identifiers PREFIX-N are
-- gapless and never repeat.
UPDATE companies SET issue_counter = issue_counter + 1 WHERE id = :company

-- name: IssueInsert
-- Inserts the issue numbered PREFIX-N by NextIdentifier, run just before in
-- the same transaction. No row when the company is missing or :assignee is
-- no active agent of it.
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

-- name: IssueGet
-- The issue by UUID :rid or identifier :rident, within :company ('' for any).
SELECT id, company_id, identifier, title, description, status, priority, assignee_agent_id,
	checkout_run_id, checkout_epoch, execution_run_id, execution_agent_name_key, execution_locked_at,
	started_at, completed_at, cancelled_at, created_at, updated_at, parent_id, unresolved_blocker_count, completed_epoch, relation_count
FROM issues
WHERE (id = :rid OR identifier = :rident) AND (:company = '' OR company_id = :company)

-- name: IssueByID
SELECT id, company_id, identifier, title, description, status, priority, assignee_agent_id,
	checkout_run_id, checkout_epoch, execution_run_id, execution_agent_name_key, execution_locked_at,
	started_at, completed_at, cancelled_at, created_at, updated_at, parent_id, unresolved_blocker_count, completed_epoch, relation_count
FROM issues WHERE id = :id

-- name: Inbox
-- The open issues of agent :agent, most urgent first, with the live run
-- holding each one's execution lock, if any, its parent and its
-- readiness (D9: the count and the ids of its blockers not done, comma
-- separated).
SELECT i.id, i.identifier, i.title, i.status, i.priority, i.updated_at, r.id, r.status,
	i.parent_id, i.unresolved_blocker_count,
	CASE WHEN i.unresolved_blocker_count > 0 THEN (SELECT group_concat(b.blocker_issue_id, ',')
		FROM issue_blockers b JOIN issues x ON x.id = b.blocker_issue_id
		WHERE b.issue_id = i.id AND x.status <> 'done') END
FROM issues i LEFT JOIN runs r ON r.id = i.execution_run_id
	AND ({{run_live r}})
WHERE i.assignee_agent_id = :agent AND i.status IN ('todo', 'in_progress', 'blocked')
ORDER BY i.priority_rank, i.created_at, i.id
LIMIT :limit
