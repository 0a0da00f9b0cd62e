-- $1 = @issue
-- $2 = @blocker
DELETE FROM issue_blockers WHERE issue_id = $1::text AND blocker_issue_id = $2::text
