DELETE FROM issue_blockers WHERE issue_id = :issue AND blocker_issue_id = :blocker
