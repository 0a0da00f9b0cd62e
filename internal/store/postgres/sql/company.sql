-- Server settings and companies. now() is the transaction's start, the
-- database's clock.

-- name: SettingGet
SELECT value FROM settings WHERE key = @key::text

-- name: SettingInsert
-- Inserts unless the key exists, and answers the stored value either way
-- (the conflicting row is read after the insert waited for it, so a
-- concurrent first writer's value is seen).
INSERT INTO settings (key, value) VALUES (@key::text, @value::text) ON CONFLICT (key) DO UPDATE SET value = settings.value
RETURNING value

-- name: CompanyInsert
-- The company and its company.created row.
WITH c AS (
	INSERT INTO companies (id, name, issue_prefix, created_at, escalate_after_failures)
	VALUES (@id::text, @name::text, @prefix::text, now(), @escalate::integer)
	RETURNING id, name, issue_prefix, created_at, escalate_after_failures
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT c.id, @actor_type::text, @actor_id::text, @actor_run::text, @actor_request::text, 'company.created', 'company', c.id,
		jsonb_build_object('name', c.name, 'issuePrefix', c.issue_prefix) FROM c
)
SELECT id, name, issue_prefix, created_at, escalate_after_failures FROM c

-- name: CompanyGet
SELECT id, name, issue_prefix, created_at, escalate_after_failures FROM companies WHERE id = @id::text

-- name: CompanyUpdate
-- E1: the company's settings (a NULL parameter leaves its column) and,
-- when one changed, its company.updated {changes} row.
WITH old AS (
	SELECT escalate_after_failures AS v FROM companies WHERE id = @id::text
), c AS (
	UPDATE companies SET escalate_after_failures = coalesce(@escalate::integer, escalate_after_failures)
	WHERE id = @id::text
	RETURNING id, name, issue_prefix, created_at, escalate_after_failures
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT c.id, @actor_type::text, @actor_id::text, @actor_run::text, @actor_request::text, 'company.updated', 'company', c.id,
		jsonb_build_object('changes', jsonb_build_object('escalateAfterFailures',
			jsonb_build_object('from', old.v, 'to', c.escalate_after_failures)))
	FROM c, old WHERE old.v <> c.escalate_after_failures
)
SELECT id, name, issue_prefix, created_at, escalate_after_failures FROM c
