-- clasp schema v19: two facts kept on their rows so that answers need no
-- extra read. As the PostgreSQL schema v17.
--
-- issues.relation_count is how many dependency edges touch the issue, as
-- the blocked issue or as the blocker (D9). An answer about an issue whose
-- count is 0 has empty blockedBy and blocks lists without reading
-- issue_blockers; most issues have no edge, and that read was a fifth of a
-- checkout's work. The triggers below keep the count in the transaction of
-- every edge change.
--
-- companies.archived_at: an archived company is left out of the company
-- list (and the board's picker) unless archived ones are asked for; its
-- data stays as it was, and it can be restored. NULL: not archived.

-- +goose Up
ALTER TABLE issues ADD COLUMN relation_count INTEGER NOT NULL DEFAULT 0 CHECK (relation_count >= 0);
UPDATE issues SET relation_count =
    (SELECT count(*) FROM issue_blockers b WHERE b.issue_id = issues.id)
    + (SELECT count(*) FROM issue_blockers b WHERE b.blocker_issue_id = issues.id)
WHERE id IN (SELECT issue_id FROM issue_blockers UNION SELECT blocker_issue_id FROM issue_blockers);

-- +goose StatementBegin
-- D9: an edge added moves the relation count of both its ends.
CREATE TRIGGER issue_blockers_relations_added AFTER INSERT ON issue_blockers
BEGIN
    UPDATE issues SET relation_count = relation_count + 1 WHERE id IN (NEW.issue_id, NEW.blocker_issue_id);
END;
-- +goose StatementEnd

-- +goose StatementBegin
-- D9: an edge removed moves the relation count of both its ends back.
CREATE TRIGGER issue_blockers_relations_removed AFTER DELETE ON issue_blockers
BEGIN
    UPDATE issues SET relation_count = relation_count - 1 WHERE id IN (OLD.issue_id, OLD.blocker_issue_id);
END;
-- +goose StatementEnd

ALTER TABLE companies ADD COLUMN archived_at INTEGER;
