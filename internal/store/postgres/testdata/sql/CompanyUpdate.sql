-- $1 = @name
-- $2 = @branch_template
-- $3 = @id
-- $4 = @actor_type
-- $5 = @actor_id
-- $6 = @actor_run
-- $7 = @actor_request
WITH c AS (
	UPDATE companies SET name = coalesce($1::text, name), branch_template = coalesce($2::text, branch_template)
	WHERE id = $3::text
	RETURNING id, name, issue_prefix, branch_template, created_at, archived_at
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT c.id, $4::text, $5::text, $6::text, $7::text, 'company.updated', 'company', c.id,
		jsonb_strip_nulls(jsonb_build_object('name', $1::text, 'branchTemplate', $2::text)) FROM c
)
SELECT id, name, issue_prefix, branch_template, created_at, archived_at FROM c
