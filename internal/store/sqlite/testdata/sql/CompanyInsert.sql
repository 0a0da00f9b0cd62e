INSERT INTO companies (id, name, issue_prefix, created_at, escalate_after_failures) VALUES (:id, :name, :prefix, :now, :escalate)
RETURNING id, name, issue_prefix, created_at, escalate_after_failures
