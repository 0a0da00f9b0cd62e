-- clasp schema v3 for PostgreSQL: indexes for claim-next (POST
-- /api/agents/me/claim, internal/store/postgres/claim.go), as in
-- the SQLite schema v4. A claim picks, per expected status, the first
-- eligible issue in (priority_rank, created_at, id) order from one ordered
-- index range, FOR UPDATE SKIP LOCKED: the unassigned issues of a company
-- (partial index), and the issues assigned to the calling agent
-- (issues_assignee_status, now ending in id: the ORDER BY needs no sort).
-- (Version 2 is the server-managed runs migration.)

-- +goose Up
CREATE INDEX issues_claim_unassigned ON issues(company_id, status, priority_rank, created_at, id)
    WHERE assignee_agent_id IS NULL;
DROP INDEX issues_assignee_status;
CREATE INDEX issues_assignee_status ON issues(assignee_agent_id, status, priority_rank, created_at, id);
