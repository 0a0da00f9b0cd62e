INSERT INTO companies (id, name, issue_prefix, branch_template, created_at, escalate_after_failures)
VALUES (:id, :name, :prefix, :branch_template, :now, :escalate)
RETURNING id, name, issue_prefix, branch_template, created_at, archived_at, escalate_after_failures
