-- clasp schema v5 for PostgreSQL: a wake request keeps the hash of its
-- request (reason and issue, store.WakeRequestHash) with its idempotency
-- key, so that the key reused with a different request is refused (422
-- idempotency_key_reused), as in the SQLite schema v6. NULL for wakes
-- recorded before.

-- +goose Up
ALTER TABLE wake_requests ADD COLUMN request_hash TEXT;
