-- $1 = @id
-- $2 = @name
-- $3 = @prefix
-- $4 = @escalate
-- $5 = @actor_type
-- $6 = @actor_id
-- $7 = @actor_run
-- $8 = @actor_request
WITH c AS (
	INSERT INTO companies (id, name, issue_prefix, created_at, escalate_after_failures)
	VALUES ($1::text, $2::text, $3::text, now(), $4::integer)
	RETURNING id, name, issue_prefix, created_at, escalate_after_failures
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT c.id, $5::text, $6::text, $7::text, $8::text, 'company.created', 'company', c.id,
		jsonb_build_object('name', c.name, 'issuePrefix', c.issue_prefix) FROM c
)
SELECT id, name, issue_prefix, created_at, escalate_after_failures FROM c
