-- clasp schema v18: the git gate (RULES.md, The git gate). An issue
-- records the fencing epoch it was completed under (completed_epoch: the
-- checkout_epoch of the statement that moved it to done, NULL while it
-- is not done), so that work finished under that epoch can be told from
-- work of a superseded holder. A gate token is a read-only credential of
-- one company that may only ask whether stamped commits may be written;
-- only its hash is kept. The PostgreSQL schema v16 does the same.

-- +goose Up
ALTER TABLE issues ADD COLUMN completed_epoch INTEGER;
UPDATE issues SET completed_epoch = checkout_epoch WHERE status = 'done';

CREATE TABLE gate_tokens (
    id           TEXT PRIMARY KEY,
    company_id   TEXT NOT NULL REFERENCES companies(id),
    name         TEXT NOT NULL,
    prefix       TEXT NOT NULL,
    token_hash   TEXT NOT NULL UNIQUE,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at   INTEGER
) STRICT;
CREATE INDEX gate_tokens_company ON gate_tokens(company_id);
