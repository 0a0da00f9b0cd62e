-- The audit trail: one row per change, written by the statement (or in
-- the transaction) of the change. created_at is now(), the transaction's
-- time, and id the next value of the identity.

-- name: ActivityInsert
INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
VALUES (@company::text, @actor_type::text, @actor_id::text, @actor_run::text, @actor_request::text,
	@action::text, @entity_type::text, @entity_id::text, @details::jsonb)
