-- $1 = @issue
SELECT i.id, i.identifier FROM issue_blockers b JOIN issues i ON i.id = b.blocker_issue_id
WHERE b.issue_id = $1::text
