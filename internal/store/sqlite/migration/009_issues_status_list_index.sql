-- clasp schema v9: the issues of a company per status in keyset order
-- (created_at DESC, id DESC), the order and cursor of IssueList, so that
-- a status-filtered page (?status=todo, ?status=todo&assigneeAgentId=none,
-- the lists agents poll for work) seeks its status and stops after the
-- page instead of walking issues_company_created past every issue of the
-- other statuses (done issues pile up: 17 to 90 ms a page at 51,000
-- issues, see BENCHMARKS.md "Filtered issue lists at scale"). It replaces
-- issues_company_status (company_id, status, priority_rank, created_at),
-- which no query used (claim-next walks issues_claim_unassigned and
-- issues_assignee_status), so a checkout or release, which change status,
-- still update the same number of indexes. The PostgreSQL schema v7 does
-- the same.

-- +goose Up
DROP INDEX issues_company_status;
CREATE INDEX issues_company_status_created ON issues(company_id, status, created_at DESC, id DESC);
