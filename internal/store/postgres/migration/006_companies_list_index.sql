-- clasp schema v6 for PostgreSQL: the companies in keyset order
-- (created_at, id), the order and cursor of CompanyList, so that a page
-- reads its rows from the index instead of scanning and sorting the whole
-- table (keyset pagination), as the SQLite schema v8.

-- +goose Up
CREATE INDEX companies_created ON companies(created_at, id);
