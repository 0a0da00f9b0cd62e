-- Server settings and companies. Times are unix microseconds (:now is the
-- write transaction's time).

-- name: SettingGet
SELECT value FROM settings WHERE key = :key

-- name: SettingInsert
-- The first value of a key wins; a later one changes nothing. Answers the
-- stored value either way.
INSERT INTO settings (key, value) VALUES (:key, :value) ON CONFLICT (key) DO UPDATE SET value = settings.value
RETURNING value

-- name: CompanyInsert
INSERT INTO companies (id, name, issue_prefix, branch_template, created_at, escalate_after_failures)
VALUES (:id, :name, :prefix, :branch_template, :now, :escalate)
RETURNING id, name, issue_prefix, branch_template, created_at, archived_at, escalate_after_failures

-- name: CompanyGet
SELECT id, name, issue_prefix, branch_template, created_at, archived_at, escalate_after_failures FROM companies WHERE id = :id

-- name: CompanyUpdate
-- The fields given; a NULL parameter leaves its column (the name, the
-- branch template (G5), the escalation setting (E1)). The store writes
-- company.updated with what changed.
UPDATE companies SET name = coalesce(:name, name), branch_template = coalesce(:branch_template, branch_template),
	escalate_after_failures = coalesce(:escalate, escalate_after_failures)
WHERE id = :id
RETURNING id, name, issue_prefix, branch_template, created_at, archived_at, escalate_after_failures

-- name: CompanyArchive
-- Archives company :id (:archive 1) or restores it (0) when its state
-- differs, answering the company and changed (1); the store then writes
-- company.archived or company.unarchived. No row: no such company, or it
-- was already in that state (the store reads it to tell which).
UPDATE companies SET archived_at = CASE WHEN :archive THEN :now END
WHERE id = :id AND (archived_at IS NULL) = (:archive = 1)
RETURNING id, name, issue_prefix, branch_template, created_at, archived_at, escalate_after_failures, 1
