-- clasp schema v2: an idempotency record names the resource it created
-- instead of holding the first response's body. The record is now written in
-- the creating transaction (store.IdempotencyParams), so there is no
-- in-flight state to keep (status_code goes), and a replay re-reads the
-- resource by id, so no response body, and no run token, is ever stored
-- (body goes; resource_type and resource_id come).
--
-- Answered records of v1 are carried over, their resource read from the
-- stored body (an issue has "identifier", a run "attempt", a comment
-- "issueId"); reservations still in flight are dropped. The old table is
-- emptied with secure_delete on before it is dropped, so that the run tokens
-- its bodies held are overwritten in the database file, not left in free
-- pages.

-- +goose Up

CREATE TABLE idempotency_keys_v2 (
    actor_id      TEXT NOT NULL,
    key           TEXT NOT NULL,
    request_hash  TEXT NOT NULL,
    resource_type TEXT NOT NULL CHECK (resource_type IN ('issue','comment','run')),
    resource_id   TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    PRIMARY KEY (actor_id, key)
) STRICT;

INSERT INTO idempotency_keys_v2 (actor_id, key, request_hash, resource_type, resource_id, created_at)
SELECT actor_id, key, request_hash, kind, json_extract(b, '$.id'), created_at FROM (
    SELECT actor_id, key, request_hash, created_at, b,
        CASE WHEN json_type(b, '$.identifier') = 'text' THEN 'issue'
             WHEN json_type(b, '$.attempt') = 'integer' THEN 'run'
             WHEN json_type(b, '$.issueId') = 'text' THEN 'comment' END AS kind
    FROM (SELECT actor_id, key, request_hash, created_at, CAST(body AS TEXT) AS b FROM idempotency_keys
          WHERE status_code BETWEEN 200 AND 299 AND body IS NOT NULL)
    WHERE json_valid(b))
WHERE kind IS NOT NULL AND json_type(b, '$.id') = 'text';

PRAGMA secure_delete = ON;
DELETE FROM idempotency_keys;
DROP TABLE idempotency_keys;
PRAGMA secure_delete = OFF;

ALTER TABLE idempotency_keys_v2 RENAME TO idempotency_keys;
-- Expired records (older than 24 hours) are deleted by age.
CREATE INDEX idempotency_keys_created ON idempotency_keys(created_at);
