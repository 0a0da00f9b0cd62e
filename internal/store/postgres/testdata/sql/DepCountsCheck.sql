-- $1 = @company
SELECT i.id, i.unresolved_blocker_count, i.open_child_count,
	(SELECT count(*) FROM issue_blockers b JOIN issues x ON x.id = b.blocker_issue_id
		WHERE b.issue_id = i.id AND x.status <> 'done')::integer,
	(SELECT count(*) FROM issues c WHERE c.parent_id = i.id AND c.status NOT IN ('done', 'cancelled'))::integer
FROM issues i WHERE i.company_id = $1::text
	AND (i.unresolved_blocker_count <> (SELECT count(*) FROM issue_blockers b JOIN issues x ON x.id = b.blocker_issue_id
			WHERE b.issue_id = i.id AND x.status <> 'done')
		OR i.open_child_count <> (SELECT count(*) FROM issues c WHERE c.parent_id = i.id AND c.status NOT IN ('done', 'cancelled')))
