-- $1 = @company
-- $2 = @issue
-- $3 = @blocker
INSERT INTO issue_blockers (company_id, issue_id, blocker_issue_id, created_at)
VALUES ($1::text, $2::text, $3::text, now())
ON CONFLICT DO NOTHING
