-- clasp schema v17 for PostgreSQL: two facts kept on their rows so that
-- answers need no extra read. As the SQLite schema v19.
--
-- issues.relation_count is how many dependency edges touch the issue, as
-- the blocked issue or as the blocker (D9). An answer about an issue whose
-- count is 0 has empty blockedBy and blocks lists without reading
-- issue_blockers; most issues have no edge, and that read was a fifth of a
-- checkout's work. The trigger below keeps the count in the transaction of
-- every edge change. It updates the blocker's row as well as the blocked
-- issue's, so the store locks the blockers of the edges that change FOR
-- UPDATE (DepLockBlockers, in id order) rather than FOR SHARE: two edge
-- changes on one blocker then queue on its row instead of both holding a
-- shared lock and each waiting to upgrade it (a deadlock). Every
-- interleaving written out in schema v15 holds with the stronger lock.
--
-- companies.archived_at: an archived company is left out of the company
-- list (and the board's picker) unless archived ones are asked for; its
-- data stays as it was, and it can be restored. NULL: not archived.

-- +goose Up
ALTER TABLE issues ADD COLUMN relation_count integer NOT NULL DEFAULT 0 CHECK (relation_count >= 0);
UPDATE issues i SET relation_count = e.n
FROM (SELECT id, count(*) AS n FROM (
        SELECT issue_id AS id FROM issue_blockers
        UNION ALL SELECT blocker_issue_id FROM issue_blockers) x
      GROUP BY id) e
WHERE i.id = e.id;

-- +goose StatementBegin
-- D9: an edge added or removed moves the relation count of both its ends.
CREATE FUNCTION clasp_blocker_relations() RETURNS trigger LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        UPDATE issues SET relation_count = relation_count + 1 WHERE id IN (NEW.issue_id, NEW.blocker_issue_id);
    ELSE
        UPDATE issues SET relation_count = relation_count - 1 WHERE id IN (OLD.issue_id, OLD.blocker_issue_id);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER issue_blockers_relations AFTER INSERT OR DELETE ON issue_blockers
    FOR EACH ROW EXECUTE FUNCTION clasp_blocker_relations();

ALTER TABLE companies ADD COLUMN archived_at timestamptz;
