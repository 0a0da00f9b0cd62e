-- $1 = @id
-- $2 = @escalate
-- $3 = @actor_type
-- $4 = @actor_id
-- $5 = @actor_run
-- $6 = @actor_request
WITH old AS (
	SELECT escalate_after_failures AS v FROM companies WHERE id = $1::text
), c AS (
	UPDATE companies SET escalate_after_failures = coalesce($2::integer, escalate_after_failures)
	WHERE id = $1::text
	RETURNING id, name, issue_prefix, created_at, escalate_after_failures
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT c.id, $3::text, $4::text, $5::text, $6::text, 'company.updated', 'company', c.id,
		jsonb_build_object('changes', jsonb_build_object('escalateAfterFailures',
			jsonb_build_object('from', old.v, 'to', c.escalate_after_failures)))
	FROM c, old WHERE old.v <> c.escalate_after_failures
)
SELECT id, name, issue_prefix, created_at, escalate_after_failures FROM c
