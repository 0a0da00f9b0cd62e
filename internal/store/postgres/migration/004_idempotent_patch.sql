-- clasp schema v4 for PostgreSQL: PATCH /api/issues/{id} honours
-- Idempotency-Key (SPEC section 3: agents retry after network errors), so
-- an idempotency record may also name an issue that a PATCH updated
-- (resource_type 'issue_update', see store.IssueUpdateParams.Idempotency),
-- as in the SQLite schema v5.

-- +goose Up
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_resource_type_check;
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_resource_type_check
    CHECK (resource_type IN ('issue','comment','run','issue_update'));
