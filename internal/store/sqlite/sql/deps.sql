-- Issue dependencies (RULES.md, Dependencies, rules D1-D10): the edges,
-- the cycle checks, the relations read and the dependency wakes, in the
-- order of internal/store/postgres/sql/deps.sql, under the same statement
-- names. The counts of unresolved blockers and open children are kept by
-- the triggers of schema v17 (migration/017_dependencies.sql). Every
-- statement but the reads runs inside the write transaction of the change
-- (store.ApplyDeps, the wakes); one writer runs at a time. :now is the
-- transaction's time.

-- name: DepIssueRef
-- D4: the issue :rid (UUID) or :rident (identifier) of company :company:
-- its id, identifier and status; no row when there is none.
SELECT i.id, i.identifier, i.status FROM issues i
WHERE (i.id = :rid OR i.identifier = :rident) AND i.company_id = :company

-- name: DepLockCompany
-- D3: nothing to lock: the write transaction holds the database's write
-- lock, so the cycle check sees every earlier edge (PostgreSQL takes an
-- advisory lock of the company here).
SELECT :company IS NOT NULL

-- name: DepLockBlockers
-- D5: nothing to lock (one writer; PostgreSQL locks the blockers :ids FOR
-- UPDATE here).
SELECT count(*) FROM json_each(:ids)

-- name: DepBlockerCycle
-- D3: whether an edge ":target blocked by :start" closes a cycle: the walk
-- from :start down its blockers follows issue_blockers' primary key (UNION
-- keeps each pair once) and answers its rows (id, the issue it was
-- reached from, identifier) only when it reached :target: no row, no
-- cycle. (The WITH sits in a sub-select: the statement is a SELECT.)
SELECT * FROM (WITH RECURSIVE w(id, prev) AS MATERIALIZED (
	SELECT :start, NULL
	UNION
	SELECT b.blocker_issue_id, b.issue_id FROM issue_blockers b JOIN w ON b.issue_id = w.id
)
SELECT w.id, w.prev, i.identifier FROM w JOIN issues i ON i.id = w.id
WHERE EXISTS (SELECT 1 FROM w x WHERE x.id = :target))

-- name: DepAncestors
-- D3/D9: issue :start and its ancestors, nearest first (id, identifier):
-- the parent chain walked up by primary key (bounded by :max steps).
SELECT * FROM (WITH RECURSIVE w(id, depth) AS (
	SELECT :start, 0
	UNION ALL
	SELECT i.parent_id, w.depth + 1 FROM issues i JOIN w ON i.id = w.id
	WHERE i.parent_id IS NOT NULL AND w.depth < :max
)
SELECT w.id, i.identifier FROM w JOIN issues i ON i.id = w.id ORDER BY w.depth)

-- name: DepBlockerList
-- D5: the blockers of issue :issue: id and identifier.
SELECT i.id, i.identifier FROM issue_blockers b JOIN issues i ON i.id = b.blocker_issue_id
WHERE b.issue_id = :issue

-- name: DepBlockerInsert
-- D5: issue :issue (of :company) is blocked by :blocker; the trigger
-- issue_blockers_added counts it when :blocker is not done. One row when
-- it is new.
INSERT INTO issue_blockers (company_id, issue_id, blocker_issue_id, created_at)
VALUES (:company, :issue, :blocker, :now)
ON CONFLICT DO NOTHING

-- name: DepBlockerDelete
-- D5: issue :issue is no longer blocked by :blocker; the trigger
-- issue_blockers_removed stops counting it.
DELETE FROM issue_blockers WHERE issue_id = :issue AND blocker_issue_id = :blocker

-- name: DepSetParent
-- D5: issue :issue moves under :parent (NULL: top level); the trigger
-- issues_parent_counts moves its open child from the old parent to the new.
-- One row changed when the parent changed.
UPDATE issues SET parent_id = :parent, updated_at = :now
WHERE id = :issue AND parent_id IS NOT :parent

-- name: DepParentOf
-- D5: the parent of issue :issue (NULL at top level).
SELECT parent_id FROM issues WHERE id = :issue

-- name: DepUnresolved
-- D1/D2: the blockers of issue :issue that are not done: id and identifier.
SELECT i.id, i.identifier FROM issue_blockers b JOIN issues i ON i.id = b.blocker_issue_id
WHERE b.issue_id = :issue AND i.status <> 'done'

-- name: DepRelations
-- D9: the relations of issues :ids of company :company, one read: a row
-- per issue that exists ('self'), per blocker ('blocker'), per dependent
-- ('dependent') and per ancestor ('ancestor', depth 1 for the parent),
-- each naming its subject issue and the related issue's summary. (The
-- WITH sits in a sub-select so that the statement is a SELECT, prepared
-- on the readers.)
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

-- name: DepReadyDue
-- D8: issues whose ready state is due (every blocker done, a generation
-- not woken yet), at most :limit, through the partial index
-- issues_ready_due: id and assignee.
SELECT i.id, i.assignee_agent_id FROM issues i
WHERE i.ready_woken_generation < i.ready_generation AND i.unresolved_blocker_count = 0
ORDER BY i.id LIMIT :limit

-- name: DepChildrenDue
-- D8: parents whose children state is due (every child closed, a
-- generation not woken yet), at most :limit (partial index
-- issues_children_due): id and assignee.
SELECT i.id, i.assignee_agent_id FROM issues i
WHERE i.children_woken_generation < i.children_generation AND i.open_child_count = 0
ORDER BY i.id LIMIT :limit

-- name: DepReadyMark
-- D8: the compare-and-set that claims issue :id's due ready state for one
-- wake: it matches only while the state is due and the assignee is still
-- :assignee, and marks the generation woken; it answers the issue's
-- company, identifier, status and the generation. No row: someone else
-- claimed it, or it is no longer due.
UPDATE issues SET ready_woken_generation = ready_generation
WHERE id = :id AND ready_woken_generation < ready_generation AND unresolved_blocker_count = 0
	AND assignee_agent_id IS :assignee
RETURNING company_id, identifier, status, ready_generation

-- name: DepChildrenMark
-- D8: DepReadyMark for the children state of parent :id.
UPDATE issues SET children_woken_generation = children_generation
WHERE id = :id AND children_woken_generation < children_generation AND open_child_count = 0
	AND assignee_agent_id IS :assignee
RETURNING company_id, identifier, status, children_generation

-- name: DepCountsCheck
-- D10: the issues of company :company whose maintained counts differ from
-- those recomputed from the edges and the children (none when they all
-- agree): id, then the maintained and the recomputed unresolved blocker,
-- open child and relation counts.
SELECT * FROM (SELECT i.id, i.unresolved_blocker_count, i.open_child_count, i.relation_count,
	(SELECT count(*) FROM issue_blockers b JOIN issues x ON x.id = b.blocker_issue_id
		WHERE b.issue_id = i.id AND x.status <> 'done') AS unresolved,
	(SELECT count(*) FROM issues c WHERE c.parent_id = i.id AND c.status NOT IN ('done', 'cancelled')) AS open_children,
	((SELECT count(*) FROM issue_blockers b WHERE b.issue_id = i.id)
		+ (SELECT count(*) FROM issue_blockers b WHERE b.blocker_issue_id = i.id)) AS relations
	FROM issues i WHERE i.company_id = :company) r
WHERE r.unresolved_blocker_count <> r.unresolved OR r.open_child_count <> r.open_children OR r.relation_count <> r.relations
