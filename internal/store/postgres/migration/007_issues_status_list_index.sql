-- clasp schema v7 for PostgreSQL: the issues of a company per status in
-- keyset order (created_at DESC, id DESC), the order and cursor of
-- IssueList, so that a status-filtered page seeks its status and stops
-- after the page instead of walking issues_company_created past every
-- issue of the other statuses (done issues pile up). It replaces
-- issues_company_status (company_id, status, priority_rank, created_at),
-- which no query used, so checkout and release (which change status, and
-- are never HOT updates) still write the same number of index entries.
-- As the SQLite schema v9.

-- +goose Up
DROP INDEX issues_company_status;
CREATE INDEX issues_company_status_created ON issues(company_id, status, created_at DESC, id DESC);
