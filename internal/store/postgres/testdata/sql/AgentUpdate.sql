-- $1 = @status
-- $2 = @name
-- $3 = @name_key
-- $4 = @role
-- $5 = @id
-- $6 = @actor_type
-- $7 = @actor_id
-- $8 = @actor_run
-- $9 = @actor_request
-- $10 = @changes
WITH a AS (
	UPDATE agents SET
		status = coalesce($1::text, status),
		name = coalesce($2::text, name),
		name_key = coalesce($3::text, name_key),
		role = coalesce($4::text, role)
	WHERE id = $5::text AND NOT (status = 'terminated' AND coalesce($1::text, status) <> 'terminated')
	RETURNING id, company_id, name, name_key, role, status, created_at, last_heartbeat_at
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT a.company_id, $6::text, $7::text, $8::text, $9::text, 'agent.updated', 'agent', a.id,
		$10::jsonb FROM a
)
SELECT id, company_id, name, name_key, role, status, created_at, last_heartbeat_at FROM a
