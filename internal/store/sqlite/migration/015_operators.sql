-- clasp schema v15: operator tokens and board sessions. An operator token
-- is a credential of a person or a tool acting as the board, with a name,
-- a role (admin, operator, viewer) and a scope (company_id, NULL for every
-- company); only its hash is kept. A board session is a signed-in
-- browser: the hash of the session secret its cookie carries, the token it
-- was opened with, and its times. The board token of earlier versions
-- (setting board_token_hash) becomes an admin token named "board" the
-- first time it is used. The PostgreSQL schema v13 does the same.

-- +goose Up
CREATE TABLE operator_tokens (
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    prefix       TEXT NOT NULL,
    role         TEXT NOT NULL CHECK (role = 'admin' OR role = 'operator' OR role = 'viewer'),
    company_id   TEXT REFERENCES companies(id),
    token_hash   TEXT NOT NULL UNIQUE,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER,
    last_used_at INTEGER,
    revoked_at   INTEGER
) STRICT;

CREATE TABLE board_sessions (
    id_hash      TEXT PRIMARY KEY,
    token_id     TEXT NOT NULL REFERENCES operator_tokens(id),
    created_at   INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL
) STRICT;
CREATE INDEX board_sessions_token ON board_sessions(token_id);
