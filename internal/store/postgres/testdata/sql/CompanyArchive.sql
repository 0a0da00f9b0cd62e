-- $1 = @archive
-- $2 = @id
-- $3 = @actor_type
-- $4 = @actor_id
-- $5 = @actor_run
-- $6 = @actor_request
WITH u AS (
	UPDATE companies SET archived_at = CASE WHEN $1::boolean THEN now() END
	WHERE id = $2::text AND (archived_at IS NULL) = $1::boolean
	RETURNING id, name, issue_prefix, branch_template, created_at, archived_at, escalate_after_failures
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT u.id, $3::text, $4::text, $5::text, $6::text,
		CASE WHEN $1::boolean THEN 'company.archived' ELSE 'company.unarchived' END, 'company', u.id,
		jsonb_build_object('name', u.name, 'issuePrefix', u.issue_prefix) FROM u
)
SELECT id, name, issue_prefix, branch_template, created_at, archived_at, escalate_after_failures, true FROM u
