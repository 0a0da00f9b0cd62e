-- clasp schema v5: PATCH /api/issues/{id} honours Idempotency-Key (SPEC
-- section 3: agents retry after network errors), so an idempotency record
-- may also name an issue that a PATCH updated (resource_type
-- 'issue_update', see store.IssueUpdateParams.Idempotency). SQLite cannot
-- alter a CHECK, so the table is rebuilt with the wider one; its records
-- are carried over as they are.

-- +goose Up
CREATE TABLE idempotency_keys_v5 (
    actor_id      TEXT NOT NULL,
    key           TEXT NOT NULL,
    request_hash  TEXT NOT NULL,
    resource_type TEXT NOT NULL CHECK (resource_type IN ('issue','comment','run','issue_update')),
    resource_id   TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    PRIMARY KEY (actor_id, key)
) STRICT;

INSERT INTO idempotency_keys_v5 (actor_id, key, request_hash, resource_type, resource_id, created_at)
SELECT actor_id, key, request_hash, resource_type, resource_id, created_at FROM idempotency_keys;

DROP TABLE idempotency_keys;
ALTER TABLE idempotency_keys_v5 RENAME TO idempotency_keys;
-- Expired records (older than 24 hours) are deleted by age.
CREATE INDEX idempotency_keys_created ON idempotency_keys(created_at);
