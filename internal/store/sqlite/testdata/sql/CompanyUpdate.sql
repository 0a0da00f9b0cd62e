UPDATE companies SET name = coalesce(:name, name), branch_template = coalesce(:branch_template, branch_template),
	escalate_after_failures = coalesce(:escalate, escalate_after_failures)
WHERE id = :id
RETURNING id, name, issue_prefix, branch_template, created_at, archived_at, escalate_after_failures
