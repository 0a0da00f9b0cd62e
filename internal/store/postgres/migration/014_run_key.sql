-- clasp schema v14: a run opened with an agent API key records the key's
-- hash, so that revoking the key ends the runs it opened (and the run
-- tokens they carry). Runs opened before, and server-managed runs, have
-- none. The SQLite schema v16 does the same.

-- +goose Up
ALTER TABLE runs ADD COLUMN key_hash TEXT;
CREATE INDEX runs_key_live ON runs(key_hash) WHERE key_hash IS NOT NULL AND status IN ('queued', 'running');
