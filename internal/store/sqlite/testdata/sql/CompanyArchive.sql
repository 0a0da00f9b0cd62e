UPDATE companies SET archived_at = CASE WHEN :archive THEN :now END
WHERE id = :id AND (archived_at IS NULL) = (:archive = 1)
RETURNING id, name, issue_prefix, branch_template, created_at, archived_at, escalate_after_failures, 1
