SELECT * FROM (WITH RECURSIVE s AS (
	-- (+company_id: the look-up goes by primary key, never by the company's
	-- index, which would read every issue of the company on each answer)
	SELECT i.id, i.parent_id FROM issues i WHERE i.id IN (SELECT value FROM json_each(:ids)) AND +i.company_id = :company
), a(subject, id, depth) AS (
	SELECT s.id, s.parent_id, 1 FROM s WHERE s.parent_id IS NOT NULL
	UNION ALL
	SELECT a.subject, p.parent_id, a.depth + 1 FROM a JOIN issues p ON p.id = a.id
	WHERE p.parent_id IS NOT NULL AND a.depth < 10000
)
SELECT 'self', s.id, s.id, '', '', '', 0 FROM s
UNION ALL
SELECT 'blocker', b.issue_id, i.id, i.identifier, i.title, i.status, 0
FROM s JOIN issue_blockers b ON b.issue_id = s.id JOIN issues i ON i.id = b.blocker_issue_id
UNION ALL
SELECT 'dependent', b.blocker_issue_id, i.id, i.identifier, i.title, i.status, 0
FROM s JOIN issue_blockers b ON b.blocker_issue_id = s.id JOIN issues i ON i.id = b.issue_id
UNION ALL
SELECT 'ancestor', a.subject, i.id, i.identifier, i.title, i.status, a.depth
FROM a JOIN issues i ON i.id = a.id)
