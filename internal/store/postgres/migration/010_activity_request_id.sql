-- clasp schema v10 for PostgreSQL: every activity row records the id of
-- the HTTP request that wrote it (X-Request-Id, kept or made by the
-- server), so that an audit row can be matched with the request's log
-- lines and the answer the client saw. NULL for rows the server writes on
-- its own (the sweeper, the scheduler) and for rows written before. As the
-- SQLite schema v12.

-- +goose Up
ALTER TABLE activity ADD COLUMN request_id text;
