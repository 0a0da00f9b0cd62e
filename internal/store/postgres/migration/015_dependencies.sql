-- clasp schema v15 for PostgreSQL: issue dependencies and readiness
-- (RULES.md, Dependencies). An issue has a parent (parent_id) and blocker
-- edges (issue_blockers); readiness is one column of its row,
-- unresolved_blocker_count (its blockers that are not done), and a
-- parent's open_child_count counts its children that are not done or
-- cancelled. The triggers below keep both counts in the transaction of
-- every change of a status, a parent or an edge (D9), whatever statement
-- makes it, so the lock rules decide on the issue's row alone (D1, D2, D7).
-- The generation columns make the dependency wakes exactly-once (D8):
-- ready_generation grows each time unresolved_blocker_count leaves 0,
-- children_generation each time open_child_count leaves 0; a wake is due
-- while a *_woken_generation is behind its generation and the count is 0.
-- The SQLite schema v17 does the same.
--
-- Concurrency (READ COMMITTED). Each trigger function is VOLATILE: every
-- statement in it takes a new snapshot, after the row change that fired
-- it, so the count updates are statements of their own, never part of the
-- firing statement's snapshot.
--   - A status change of blocker B holds B's row lock (its UPDATE) when
--     issues_status_deps updates B's dependents; an edge added or removed
--     on B first locks B FOR SHARE (issue_blockers_added/_removed, and
--     the store's DepLockBlockers before the inserts) and reads B's status
--     under that lock. So the two are serialised on B's row: if the edge
--     change locks B first, the status change waits for its commit and
--     its dependents' update (a new snapshot) sees the committed edge; if
--     the status change locks B first, the edge change waits, then reads
--     B's committed status. Either way the count is that of the serial
--     order, never off by one.
--     In detail, for blocker B, dependent I and an edge change E of I on B
--     (transaction T1) against a status change S of B into or out of done
--     (T2): (a) T1 locks B FOR SHARE first: T2's UPDATE of B waits for T1's
--     commit; its trigger's UPDATE of B's dependents then runs on a
--     snapshot that holds E (added: I counted by T1 when B was not done,
--     then moved by T2; removed: I no longer moved by T2). (b) T2 updates B
--     first: T1's FOR SHARE waits for T2's commit and returns B's committed
--     status; T2's trigger ran before E existed (added: T1 counts B as it
--     now is; removed: T1 uncounts B only when it is not done, which is
--     what T2 left). No order adds or removes B twice, or never.
--   - A dependent's count update locks the dependent's row: a checkout,
--     claim or PATCH of the dependent that read the row before it fails its
--     compare-and-set on the row version (or, claim, re-checks the row's
--     WHERE on its latest version) and decides again on the new count; one
--     that locked the row first makes the count update wait for its commit
--     (it then comes first in the serial order).
--   - A reopen of B against a checkout or a claim of I: if the reopen's
--     dependents update locks I first, the checkout's compare-and-set on
--     I's row version fails and it runs again on a new snapshot, which
--     sees the new count (refused, D1); the claim's FOR UPDATE SKIP LOCKED
--     skips I while the reopen holds it, and re-checks its WHERE (count 0)
--     on I's newest version once it committed. If the checkout or claim
--     locks I first, the reopen's update waits for its commit and then
--     counts I: the checkout came first in the serial order, and I stays
--     in_progress with dependencyReady false (D6).
--   - Two halves of a cycle: each transaction that adds an edge or sets a
--     parent takes the company's advisory lock (statement DepLockCompany)
--     before its cycle check, whose statement then sees the other half
--     committed (D3).
--   - The parent's open_child_count moves with the child's row lock held:
--     a child's status change and a move to another parent lock the
--     child's row, so they are serialised; the store never changes a
--     child's status and its parent in one UPDATE.

-- +goose Up
ALTER TABLE issues
    ADD COLUMN parent_id text COLLATE "C" REFERENCES issues(id),
    ADD COLUMN unresolved_blocker_count integer NOT NULL DEFAULT 0 CHECK (unresolved_blocker_count >= 0),
    ADD COLUMN open_child_count integer NOT NULL DEFAULT 0 CHECK (open_child_count >= 0),
    ADD COLUMN ready_generation integer NOT NULL DEFAULT 0,
    ADD COLUMN ready_woken_generation integer NOT NULL DEFAULT 0,
    ADD COLUMN children_generation integer NOT NULL DEFAULT 0,
    ADD COLUMN children_woken_generation integer NOT NULL DEFAULT 0;
-- D9: a parent's children, the ancestors' walk (D3) goes up by primary key
CREATE INDEX issues_parent ON issues(parent_id) WHERE parent_id IS NOT NULL;
-- D8: the due wakes, found without reading the issues that have none
CREATE INDEX issues_ready_due ON issues(id) WHERE ready_woken_generation < ready_generation AND unresolved_blocker_count = 0;
CREATE INDEX issues_children_due ON issues(id) WHERE children_woken_generation < children_generation AND open_child_count = 0;
-- D7: claim-next's unassigned branch reads only issues that may be taken:
-- a blocked issue has no entry, so a claim never steps over one
DROP INDEX issues_claim_unassigned;
CREATE INDEX issues_claim_unassigned ON issues(company_id, status, priority_rank, created_at, id)
    WHERE assignee_agent_id IS NULL AND unresolved_blocker_count = 0;

-- D5: issue_id is blocked by blocker_issue_id (both of company_id). The
-- primary key walks an issue's blockers (the cycle check, D3), the second
-- index a blocker's dependents (D9).
CREATE TABLE issue_blockers (
    company_id       text COLLATE "C" NOT NULL REFERENCES companies(id),
    issue_id         text COLLATE "C" NOT NULL REFERENCES issues(id),
    blocker_issue_id text COLLATE "C" NOT NULL REFERENCES issues(id),
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (issue_id, blocker_issue_id),
    CHECK (issue_id <> blocker_issue_id)
);
CREATE INDEX issue_blockers_blocker ON issue_blockers(blocker_issue_id, issue_id);

-- +goose StatementBegin
-- D9: a status change moves the counts of the issue's dependents (into or
-- out of done) and of its parent (into or out of done/cancelled).
CREATE FUNCTION clasp_issue_status_deps() RETURNS trigger LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF (OLD.status = 'done') <> (NEW.status = 'done') THEN
        -- the dependents locked in id order first: two blockers of the
        -- same dependents finishing at once never deadlock
        UPDATE issues d SET
            unresolved_blocker_count = d.unresolved_blocker_count + CASE WHEN NEW.status = 'done' THEN -1 ELSE 1 END,
            ready_generation = d.ready_generation + CASE WHEN NEW.status <> 'done' AND d.unresolved_blocker_count = 0 THEN 1 ELSE 0 END
        FROM (SELECT x.id FROM issues x JOIN issue_blockers b ON b.issue_id = x.id
              WHERE b.blocker_issue_id = NEW.id ORDER BY x.id FOR UPDATE OF x) l
        WHERE d.id = l.id;
    END IF;
    IF NEW.parent_id IS NOT NULL AND (OLD.status IN ('done', 'cancelled')) <> (NEW.status IN ('done', 'cancelled')) THEN
        UPDATE issues p SET
            open_child_count = p.open_child_count + CASE WHEN NEW.status IN ('done', 'cancelled') THEN -1 ELSE 1 END,
            children_generation = p.children_generation
                + CASE WHEN NEW.status NOT IN ('done', 'cancelled') AND p.open_child_count = 0 THEN 1 ELSE 0 END
        WHERE p.id = NEW.parent_id;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER issues_status_deps AFTER UPDATE OF status ON issues
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION clasp_issue_status_deps();

-- +goose StatementBegin
-- D9: an open issue moving from one parent to another moves one open child.
CREATE FUNCTION clasp_issue_parent_deps() RETURNS trigger LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF NEW.status NOT IN ('done', 'cancelled') THEN
        IF OLD.parent_id IS NOT NULL THEN
            UPDATE issues p SET open_child_count = p.open_child_count - 1 WHERE p.id = OLD.parent_id;
        END IF;
        IF NEW.parent_id IS NOT NULL THEN
            UPDATE issues p SET open_child_count = p.open_child_count + 1,
                children_generation = p.children_generation + CASE WHEN p.open_child_count = 0 THEN 1 ELSE 0 END
            WHERE p.id = NEW.parent_id;
        END IF;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER issues_parent_deps AFTER UPDATE OF parent_id ON issues
    FOR EACH ROW WHEN (OLD.parent_id IS DISTINCT FROM NEW.parent_id) EXECUTE FUNCTION clasp_issue_parent_deps();

-- +goose StatementBegin
-- D5/D9: a new edge counts when its blocker is not done, read under the
-- blocker's row lock (FOR SHARE: see the interleavings above); the
-- dependent's ready_generation grows when its count leaves 0.
CREATE FUNCTION clasp_blocker_added() RETURNS trigger LANGUAGE plpgsql VOLATILE AS $$
DECLARE st text;
BEGIN
    SELECT status INTO st FROM issues WHERE id = NEW.blocker_issue_id FOR SHARE;
    IF st IS DISTINCT FROM 'done' THEN
        UPDATE issues d SET unresolved_blocker_count = d.unresolved_blocker_count + 1,
            ready_generation = d.ready_generation + CASE WHEN d.unresolved_blocker_count = 0 THEN 1 ELSE 0 END
        WHERE d.id = NEW.issue_id;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER issue_blockers_added AFTER INSERT ON issue_blockers
    FOR EACH ROW EXECUTE FUNCTION clasp_blocker_added();

-- +goose StatementBegin
-- D5/D9: a removed edge stops counting when its blocker was not done.
CREATE FUNCTION clasp_blocker_removed() RETURNS trigger LANGUAGE plpgsql VOLATILE AS $$
DECLARE st text;
BEGIN
    SELECT status INTO st FROM issues WHERE id = OLD.blocker_issue_id FOR SHARE;
    IF st IS DISTINCT FROM 'done' THEN
        UPDATE issues d SET unresolved_blocker_count = d.unresolved_blocker_count - 1 WHERE d.id = OLD.issue_id;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER issue_blockers_removed AFTER DELETE ON issue_blockers
    FOR EACH ROW EXECUTE FUNCTION clasp_blocker_removed();
