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
	INSERT INTO companies (id, name, issue_prefix, branch_template, created_at) VALUES (@id::text, @name::text, @prefix::text, @branch_template::text, now())
	RETURNING id, name, issue_prefix, branch_template, created_at, archived_at
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT c.id, @actor_type::text, @actor_id::text, @actor_run::text, @actor_request::text, 'company.created', 'company', c.id,
		jsonb_build_object('name', c.name, 'issuePrefix', c.issue_prefix) FROM c
)
SELECT id, name, issue_prefix, branch_template, created_at, archived_at FROM c

-- name: CompanyGet
SELECT id, name, issue_prefix, branch_template, created_at, archived_at FROM companies WHERE id = @id::text

-- name: CompanyUpdate
-- Sets the fields given (a NULL argument keeps the column), with its
-- company.updated row naming the fields set.
WITH c AS (
	UPDATE companies SET name = coalesce(@name::text, name), branch_template = coalesce(@branch_template::text, branch_template)
	WHERE id = @id::text
	RETURNING id, name, issue_prefix, branch_template, created_at, archived_at
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT c.id, @actor_type::text, @actor_id::text, @actor_run::text, @actor_request::text, 'company.updated', 'company', c.id,
		jsonb_strip_nulls(jsonb_build_object('name', @name::text, 'branchTemplate', @branch_template::text)) FROM c
)
SELECT id, name, issue_prefix, branch_template, created_at, archived_at FROM c

-- name: CompanyArchive
-- Archives company @id (@archive true) or restores it (false) when its
-- state differs, with its company.archived or company.unarchived row,
-- answering the company and changed (true). No row: no such company, or
-- it was already in that state (the store reads it to tell which).
WITH u AS (
	UPDATE companies SET archived_at = CASE WHEN @archive::boolean THEN now() END
	WHERE id = @id::text AND (archived_at IS NULL) = @archive::boolean
	RETURNING id, name, issue_prefix, branch_template, created_at, archived_at
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT u.id, @actor_type::text, @actor_id::text, @actor_run::text, @actor_request::text,
		CASE WHEN @archive::boolean THEN 'company.archived' ELSE 'company.unarchived' END, 'company', u.id,
		jsonb_build_object('name', u.name, 'issuePrefix', u.issue_prefix) FROM u
)
SELECT id, name, issue_prefix, branch_template, created_at, archived_at, true FROM u
