-- $1 = @start
WITH RECURSIVE w(id) AS (
	SELECT $1::text COLLATE "C"
	UNION
	SELECT b.blocker_issue_id FROM issue_blockers b JOIN w ON b.issue_id = w.id
)
SELECT b.issue_id, b.blocker_issue_id FROM issue_blockers b JOIN w ON b.issue_id = w.id
