-- clasp schema v13 for PostgreSQL: operator tokens and board sessions. An
-- operator token is a credential of a person or a tool acting as the
-- board, with a name, a role (admin, operator, viewer) and a scope
-- (company_id, NULL for every company); only its hash is kept. A board
-- session is a signed-in browser: the hash of the session secret its
-- cookie carries, the token it was opened with, and its times. As the
-- SQLite schema v15.

-- +goose Up
CREATE TABLE operator_tokens (
    id           text COLLATE "C" PRIMARY KEY,
    name         text NOT NULL,
    prefix       text NOT NULL,
    role         text NOT NULL CHECK (role IN ('admin','operator','viewer')),
    company_id   text COLLATE "C" REFERENCES companies(id),
    token_hash   text COLLATE "C" NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz,
    last_used_at timestamptz,
    revoked_at   timestamptz
);

CREATE TABLE board_sessions (
    id_hash      text COLLATE "C" PRIMARY KEY,
    token_id     text COLLATE "C" NOT NULL REFERENCES operator_tokens(id),
    created_at   timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL
);
CREATE INDEX board_sessions_token ON board_sessions(token_id);
