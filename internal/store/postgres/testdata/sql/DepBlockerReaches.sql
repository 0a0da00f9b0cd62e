-- $1 = @start
-- $2 = @target
WITH RECURSIVE w(id) AS (
	SELECT $1::text COLLATE "C"
	UNION
	SELECT b.blocker_issue_id FROM issue_blockers b JOIN w ON b.issue_id = w.id
)
SELECT EXISTS (SELECT 1 FROM w WHERE w.id = $2::text)
