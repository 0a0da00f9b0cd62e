UPDATE companies SET escalate_after_failures = coalesce(:escalate, escalate_after_failures)
WHERE id = :id
RETURNING id, name, issue_prefix, created_at, escalate_after_failures
