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
	INSERT INTO companies (id, name, issue_prefix, branch_template, created_at, escalate_after_failures)
	VALUES (@id::text, @name::text, @prefix::text, @branch_template::text, now(), @escalate::integer)
	RETURNING id, name, issue_prefix, branch_template, created_at, archived_at, escalate_after_failures
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT c.id, @actor_type::text, @actor_id::text, @actor_run::text, @actor_request::text, 'company.created', 'company', c.id,
		jsonb_build_object('name', c.name, 'issuePrefix', c.issue_prefix) FROM c
)
SELECT id, name, issue_prefix, branch_template, created_at, archived_at, escalate_after_failures FROM c

-- name: CompanyGet
SELECT id, name, issue_prefix, branch_template, created_at, archived_at, escalate_after_failures FROM companies WHERE id = @id::text

-- name: CompanyUpdate
-- The fields given (a NULL parameter leaves its column: the name, the
-- branch template (G5), the escalation setting (E1)) and, when one
-- changed, its company.updated {changes: {field: {from, to}}} row.
WITH old AS (
	SELECT name, branch_template, escalate_after_failures FROM companies WHERE id = @id::text
), c AS (
	UPDATE companies SET name = coalesce(@name::text, name), branch_template = coalesce(@branch_template::text, branch_template),
		escalate_after_failures = coalesce(@escalate::integer, escalate_after_failures)
	WHERE id = @id::text
	RETURNING id, name, issue_prefix, branch_template, created_at, archived_at, escalate_after_failures
), ch AS (
	SELECT c.id, jsonb_strip_nulls(jsonb_build_object(
		'name', CASE WHEN old.name <> c.name THEN jsonb_build_object('from', old.name, 'to', c.name) END,
		'branchTemplate', CASE WHEN old.branch_template <> c.branch_template
			THEN jsonb_build_object('from', old.branch_template, 'to', c.branch_template) END,
		'escalateAfterFailures', CASE WHEN old.escalate_after_failures <> c.escalate_after_failures
			THEN jsonb_build_object('from', old.escalate_after_failures, 'to', c.escalate_after_failures) END)) AS changes
	FROM c, old
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT ch.id, @actor_type::text, @actor_id::text, @actor_run::text, @actor_request::text, 'company.updated', 'company', ch.id,
		jsonb_build_object('changes', ch.changes)
	FROM ch WHERE ch.changes <> '{}'::jsonb
)
SELECT id, name, issue_prefix, branch_template, created_at, archived_at, escalate_after_failures FROM c

-- name: CompanyArchive
-- Archives company @id (@archive true) or restores it (false) when its
-- state differs, with its company.archived or company.unarchived row,
-- answering the company and changed (true). No row: no such company, or
-- it was already in that state (the store reads it to tell which).
WITH u AS (
	UPDATE companies SET archived_at = CASE WHEN @archive::boolean THEN now() END
	WHERE id = @id::text AND (archived_at IS NULL) = @archive::boolean
	RETURNING id, name, issue_prefix, branch_template, created_at, archived_at, escalate_after_failures
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT u.id, @actor_type::text, @actor_id::text, @actor_run::text, @actor_request::text,
		CASE WHEN @archive::boolean THEN 'company.archived' ELSE 'company.unarchived' END, 'company', u.id,
		jsonb_build_object('name', u.name, 'issuePrefix', u.issue_prefix) FROM u
)
SELECT id, name, issue_prefix, branch_template, created_at, archived_at, escalate_after_failures, true FROM u
