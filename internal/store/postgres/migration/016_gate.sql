-- clasp schema v16 for PostgreSQL: the git gate (RULES.md, The git gate).
-- An issue records the fencing epoch it was completed under
-- (completed_epoch: the checkout_epoch of the statement that moved it to
-- done, NULL while it is not done); a gate token is a read-only
-- credential of one company that may only ask whether stamped commits may
-- be written; only its hash is kept. As the SQLite schema v18.

-- +goose Up
ALTER TABLE issues ADD COLUMN completed_epoch bigint;
UPDATE issues SET completed_epoch = checkout_epoch WHERE status = 'done';

CREATE TABLE gate_tokens (
    id           text COLLATE "C" PRIMARY KEY,
    company_id   text COLLATE "C" NOT NULL REFERENCES companies(id),
    name         text NOT NULL,
    prefix       text NOT NULL,
    token_hash   text COLLATE "C" NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL,
    last_used_at timestamptz,
    revoked_at   timestamptz
);
CREATE INDEX gate_tokens_company ON gate_tokens(company_id);
