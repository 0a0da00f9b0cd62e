-- clasp schema v11 for PostgreSQL: issues_assignee_status holds assigned
-- issues only. Its one reader with an unassigned condition was claim-next's
-- unassigned branch, which has an index of its own in claim order
-- (issues_claim_unassigned: company, status, priority_rank, created_at, id,
-- for unassigned issues) that reads one entry per claim. With statistics
-- taken while nearly every issue was assigned (issues created in bulk just
-- before agents start claiming them), the planner took
-- issues_assignee_status on (assignee_agent_id IS NULL, status) instead and
-- sorted every unassigned issue of that status on each claim (1,093 rows,
-- 1,100 buffers, 6.8 ms for one claim of 2,000 issues); without the NULL
-- entries that plan does not exist. The index is also smaller, and an
-- unassigned issue's checkout or PATCH writes one index entry less.

-- +goose Up
DROP INDEX issues_assignee_status;
CREATE INDEX issues_assignee_status ON issues(assignee_agent_id, status, priority_rank, created_at, id)
    WHERE assignee_agent_id IS NOT NULL;
