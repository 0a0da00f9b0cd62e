-- $1 = @start
-- $2 = @target
WITH RECURSIVE w(id, prev) AS (
	SELECT $1::text COLLATE "C", NULL::text COLLATE "C"
	UNION
	SELECT b.blocker_issue_id, b.issue_id FROM issue_blockers b JOIN w ON b.issue_id = w.id
)
SELECT w.id, w.prev, i.identifier FROM w JOIN issues i ON i.id = w.id
WHERE EXISTS (SELECT 1 FROM w x WHERE x.id = $2::text)
