WITH RECURSIVE w(id) AS (
	SELECT :start
	UNION
	SELECT b.blocker_issue_id FROM issue_blockers b JOIN w ON b.issue_id = w.id
)
SELECT EXISTS (SELECT 1 FROM w WHERE w.id = :target)
