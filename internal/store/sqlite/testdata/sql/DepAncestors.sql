SELECT * FROM (WITH RECURSIVE w(id, depth) AS (
	SELECT :start, 0
	UNION ALL
	SELECT i.parent_id, w.depth + 1 FROM issues i JOIN w ON i.id = w.id
	WHERE i.parent_id IS NOT NULL AND w.depth < :max
)
SELECT w.id, i.identifier FROM w JOIN issues i ON i.id = w.id ORDER BY w.depth)
