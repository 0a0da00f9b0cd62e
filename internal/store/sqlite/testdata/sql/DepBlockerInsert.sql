INSERT INTO issue_blockers (company_id, issue_id, blocker_issue_id, created_at)
VALUES (:company, :issue, :blocker, :now)
ON CONFLICT DO NOTHING
