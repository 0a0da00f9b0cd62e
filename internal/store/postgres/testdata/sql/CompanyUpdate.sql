-- $1 = @id
-- $2 = @name
-- $3 = @branch_template
-- $4 = @escalate
-- $5 = @actor_type
-- $6 = @actor_id
-- $7 = @actor_run
-- $8 = @actor_request
WITH old AS (
	SELECT name, branch_template, escalate_after_failures FROM companies WHERE id = $1::text
), c AS (
	UPDATE companies SET name = coalesce($2::text, name), branch_template = coalesce($3::text, branch_template),
		escalate_after_failures = coalesce($4::integer, escalate_after_failures)
	WHERE id = $1::text
	RETURNING id, name, issue_prefix, branch_template, created_at, archived_at, escalate_after_failures
), ch AS (
	SELECT c.id, jsonb_strip_nulls(jsonb_build_object(
		'name', CASE WHEN old.name <> c.name THEN jsonb_build_object('from', old.name, 'to', c.name) END,
		'branchTemplate', CASE WHEN old.branch_template <> c.branch_template
			THEN jsonb_build_object('from', old.branch_template, 'to', c.branch_template) END,
		'escalateAfterFailures', CASE WHEN old.escalate_after_failures <> c.escalate_after_failures
			THEN jsonb_build_object('from', old.escalate_after_failures, 'to', c.escalate_after_failures) END)) AS changes
	FROM c, old
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT ch.id, $5::text, $6::text, $7::text, $8::text, 'company.updated', 'company', ch.id,
		jsonb_build_object('changes', ch.changes)
	FROM ch WHERE ch.changes <> '{}'::jsonb
)
SELECT id, name, issue_prefix, branch_template, created_at, archived_at, escalate_after_failures FROM c
