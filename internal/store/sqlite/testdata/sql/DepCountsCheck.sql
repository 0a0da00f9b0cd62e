SELECT * FROM (SELECT i.id, i.unresolved_blocker_count, i.open_child_count, i.relation_count,
	(SELECT count(*) FROM issue_blockers b JOIN issues x ON x.id = b.blocker_issue_id
		WHERE b.issue_id = i.id AND x.status <> 'done') AS unresolved,
	(SELECT count(*) FROM issues c WHERE c.parent_id = i.id AND c.status NOT IN ('done', 'cancelled')) AS open_children,
	((SELECT count(*) FROM issue_blockers b WHERE b.issue_id = i.id)
		+ (SELECT count(*) FROM issue_blockers b WHERE b.blocker_issue_id = i.id)) AS relations
	FROM issues i WHERE i.company_id = :company) r
WHERE r.unresolved_blocker_count <> r.unresolved OR r.open_child_count <> r.open_children OR r.relation_count <> r.relations
