-- clasp schema v17: issue dependencies and readiness (RULES.md,
-- Dependencies). An issue has a parent (parent_id) and blocker edges
-- (issue_blockers); readiness is one column of its row,
-- unresolved_blocker_count (its blockers that are not done), and a
-- parent's open_child_count counts its children that are not done or
-- cancelled. The triggers below keep both counts in the transaction of
-- every change of a status, a parent or an edge (D9), whatever statement
-- makes it, so the lock rules decide on the issue's row alone (D1, D2,
-- D7). The generation columns make the dependency wakes exactly-once
-- (D8). One writer runs at a time: no interleaving to guard. The
-- PostgreSQL schema v15 does the same (and says how it guards them).

-- +goose Up
ALTER TABLE issues ADD COLUMN parent_id TEXT REFERENCES issues(id);
ALTER TABLE issues ADD COLUMN unresolved_blocker_count INTEGER NOT NULL DEFAULT 0 CHECK (unresolved_blocker_count >= 0);
ALTER TABLE issues ADD COLUMN open_child_count INTEGER NOT NULL DEFAULT 0 CHECK (open_child_count >= 0);
ALTER TABLE issues ADD COLUMN ready_generation INTEGER NOT NULL DEFAULT 0;
ALTER TABLE issues ADD COLUMN ready_woken_generation INTEGER NOT NULL DEFAULT 0;
ALTER TABLE issues ADD COLUMN children_generation INTEGER NOT NULL DEFAULT 0;
ALTER TABLE issues ADD COLUMN children_woken_generation INTEGER NOT NULL DEFAULT 0;
CREATE INDEX issues_parent ON issues(parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX issues_ready_due ON issues(id) WHERE ready_woken_generation < ready_generation AND unresolved_blocker_count = 0;
CREATE INDEX issues_children_due ON issues(id) WHERE children_woken_generation < children_generation AND open_child_count = 0;
-- D7: claim-next's unassigned branch reads only issues that may be taken
DROP INDEX issues_claim_unassigned;
CREATE INDEX issues_claim_unassigned ON issues(company_id, status, priority_rank, created_at, id)
    WHERE assignee_agent_id IS NULL AND unresolved_blocker_count = 0;

CREATE TABLE issue_blockers (
    company_id       TEXT NOT NULL REFERENCES companies(id),
    issue_id         TEXT NOT NULL REFERENCES issues(id),
    blocker_issue_id TEXT NOT NULL REFERENCES issues(id),
    created_at       INTEGER NOT NULL,
    PRIMARY KEY (issue_id, blocker_issue_id),
    CHECK (issue_id <> blocker_issue_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX issue_blockers_blocker ON issue_blockers(blocker_issue_id, issue_id);

-- +goose StatementBegin
-- D9: a blocker entering or leaving done moves its dependents' counts.
CREATE TRIGGER issues_status_blockers AFTER UPDATE OF status ON issues
WHEN (OLD.status = 'done') <> (NEW.status = 'done')
BEGIN
    UPDATE issues SET
        ready_generation = ready_generation + CASE WHEN NEW.status <> 'done' AND unresolved_blocker_count = 0 THEN 1 ELSE 0 END,
        unresolved_blocker_count = unresolved_blocker_count + CASE WHEN NEW.status = 'done' THEN -1 ELSE 1 END
    WHERE id IN (SELECT b.issue_id FROM issue_blockers b WHERE b.blocker_issue_id = NEW.id);
END;
-- +goose StatementEnd

-- +goose StatementBegin
-- D9: a child entering or leaving done/cancelled moves its parent's count.
CREATE TRIGGER issues_status_parent AFTER UPDATE OF status ON issues
WHEN NEW.parent_id IS NOT NULL AND (OLD.status IN ('done', 'cancelled')) <> (NEW.status IN ('done', 'cancelled'))
BEGIN
    UPDATE issues SET
        children_generation = children_generation
            + CASE WHEN NEW.status NOT IN ('done', 'cancelled') AND open_child_count = 0 THEN 1 ELSE 0 END,
        open_child_count = open_child_count + CASE WHEN NEW.status IN ('done', 'cancelled') THEN -1 ELSE 1 END
    WHERE id = NEW.parent_id;
END;
-- +goose StatementEnd

-- +goose StatementBegin
-- D9: an open issue moving from one parent to another moves one open child.
CREATE TRIGGER issues_parent_counts AFTER UPDATE OF parent_id ON issues
WHEN OLD.parent_id IS NOT NEW.parent_id AND NEW.status NOT IN ('done', 'cancelled')
BEGIN
    UPDATE issues SET open_child_count = open_child_count - 1 WHERE id = OLD.parent_id;
    UPDATE issues SET
        children_generation = children_generation + CASE WHEN open_child_count = 0 THEN 1 ELSE 0 END,
        open_child_count = open_child_count + 1
    WHERE id = NEW.parent_id;
END;
-- +goose StatementEnd

-- +goose StatementBegin
-- D5/D9: a new edge counts when its blocker is not done.
CREATE TRIGGER issue_blockers_added AFTER INSERT ON issue_blockers
WHEN (SELECT status FROM issues WHERE id = NEW.blocker_issue_id) <> 'done'
BEGIN
    UPDATE issues SET
        ready_generation = ready_generation + CASE WHEN unresolved_blocker_count = 0 THEN 1 ELSE 0 END,
        unresolved_blocker_count = unresolved_blocker_count + 1
    WHERE id = NEW.issue_id;
END;
-- +goose StatementEnd

-- +goose StatementBegin
-- D5/D9: a removed edge stops counting when its blocker was not done.
CREATE TRIGGER issue_blockers_removed AFTER DELETE ON issue_blockers
WHEN (SELECT status FROM issues WHERE id = OLD.blocker_issue_id) <> 'done'
BEGIN
    UPDATE issues SET unresolved_blocker_count = unresolved_blocker_count - 1 WHERE id = OLD.issue_id;
END;
-- +goose StatementEnd
