-- $1 = @id
-- $2 = @name
-- $3 = @name_key
-- $4 = @role
-- $5 = @company
-- $6 = @actor_type
-- $7 = @actor_id
-- $8 = @actor_run
-- $9 = @actor_request
WITH a AS (
	INSERT INTO agents (id, company_id, name, name_key, role, status, created_at)
	SELECT $1::text, c.id, $2::text, $3::text, $4::text, 'active', now() FROM companies c WHERE c.id = $5::text
	RETURNING id, company_id, name, name_key, role, status, created_at, last_heartbeat_at
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT a.company_id, $6::text, $7::text, $8::text, $9::text, 'agent.created', 'agent', a.id,
		jsonb_build_object('name', a.name, 'role', a.role) FROM a
)
SELECT id, company_id, name, name_key, role, status, created_at, last_heartbeat_at FROM a
