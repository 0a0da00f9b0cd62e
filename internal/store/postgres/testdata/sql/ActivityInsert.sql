-- $1 = @company
-- $2 = @actor_type
-- $3 = @actor_id
-- $4 = @actor_run
-- $5 = @actor_request
-- $6 = @action
-- $7 = @entity_type
-- $8 = @entity_id
-- $9 = @details
INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
VALUES ($1::text, $2::text, $3::text, $4::text, $5::text,
	$6::text, $7::text, $8::text, $9::jsonb)
