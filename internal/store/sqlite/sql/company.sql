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
INSERT INTO companies (id, name, issue_prefix, created_at, escalate_after_failures) VALUES (:id, :name, :prefix, :now, :escalate)
RETURNING id, name, issue_prefix, created_at, escalate_after_failures

-- name: CompanyGet
SELECT id, name, issue_prefix, created_at, escalate_after_failures FROM companies WHERE id = :id

-- name: CompanyUpdate
-- E1: the company's settings; a NULL parameter leaves its column.
UPDATE companies SET escalate_after_failures = coalesce(:escalate, escalate_after_failures)
WHERE id = :id
RETURNING id, name, issue_prefix, created_at, escalate_after_failures
