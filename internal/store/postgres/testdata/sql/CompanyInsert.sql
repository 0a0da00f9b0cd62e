-- $1 = @id
-- $2 = @name
-- $3 = @prefix
-- $4 = @branch_template
-- $5 = @escalate
-- $6 = @actor_type
-- $7 = @actor_id
-- $8 = @actor_run
-- $9 = @actor_request
WITH c AS (
	INSERT INTO companies (id, name, issue_prefix, branch_template, created_at, escalate_after_failures)
	VALUES ($1::text, $2::text, $3::text, $4::text, now(), $5::integer)
	RETURNING id, name, issue_prefix, branch_template, created_at, archived_at, escalate_after_failures
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT c.id, $6::text, $7::text, $8::text, $9::text, 'company.created', 'company', c.id,
		jsonb_build_object('name', c.name, 'issuePrefix', c.issue_prefix) FROM c
)
SELECT id, name, issue_prefix, branch_template, created_at, archived_at, escalate_after_failures FROM c
