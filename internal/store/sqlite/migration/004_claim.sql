-- clasp schema v4: indexes for claim-next (POST /api/agents/me/claim, issue
-- 5, internal/store/sqlite/claim.go). A claim picks, per expected status,
-- the first eligible issue in (priority_rank, created_at, id) order from one
-- ordered index range: the unassigned issues of a company (partial index),
-- and the issues assigned to the calling agent (issues_assignee_status, now
-- ending in id so that the whole ORDER BY comes from the index, no sort).
-- The inbox uses the same index and order.

-- +goose Up
CREATE INDEX issues_claim_unassigned ON issues(company_id, status, priority_rank, created_at, id)
    WHERE assignee_agent_id IS NULL;
DROP INDEX issues_assignee_status;
CREATE INDEX issues_assignee_status ON issues(assignee_agent_id, status, priority_rank, created_at, id);
