-- clasp schema v1 (SPEC section 1). Times are INTEGER unix microseconds UTC.
-- Ids are UUID text (lower case), except activity.id (monotonic integer, for
-- resume). Applied by goose (internal/store/sqlite/migrate.go); there are no
-- down migrations.

-- +goose Up

CREATE TABLE settings (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;

CREATE TABLE companies (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    issue_prefix  TEXT NOT NULL UNIQUE,
    issue_counter INTEGER NOT NULL DEFAULT 0, -- last N handed out as PREFIX-N
    created_at    INTEGER NOT NULL
) STRICT;

CREATE TABLE agents (
    id                TEXT PRIMARY KEY,
    company_id        TEXT NOT NULL REFERENCES companies(id),
    name              TEXT NOT NULL,
    name_key          TEXT NOT NULL,
    role              TEXT NOT NULL DEFAULT '',
    status            TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active','paused','terminated')),
    created_at        INTEGER NOT NULL,
    last_heartbeat_at INTEGER,
    UNIQUE (company_id, name_key)
) STRICT;

CREATE TABLE agent_api_keys (
    id           TEXT PRIMARY KEY,
    agent_id     TEXT NOT NULL REFERENCES agents(id),
    prefix       TEXT NOT NULL,
    token_hash   TEXT NOT NULL UNIQUE,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at   INTEGER
) STRICT;
CREATE INDEX agent_api_keys_agent ON agent_api_keys(agent_id);

CREATE TABLE runs (
    id                   TEXT PRIMARY KEY,
    company_id           TEXT NOT NULL REFERENCES companies(id),
    agent_id             TEXT NOT NULL REFERENCES agents(id),
    status               TEXT NOT NULL CHECK (status IN ('queued','running','succeeded','failed','cancelled','timed_out')),
    invocation_source    TEXT NOT NULL DEFAULT 'self',
    issue_id             TEXT,
    retry_of_run_id      TEXT,
    attempt              INTEGER NOT NULL DEFAULT 1,
    pid                  INTEGER,
    host_id              TEXT,
    lease_expires_at     INTEGER,
    last_sign_of_life_at INTEGER,
    started_at           INTEGER,
    finished_at          INTEGER,
    exit_code            INTEGER,
    error_code           TEXT,
    error                TEXT,
    token_hash           TEXT UNIQUE,
    created_at           INTEGER NOT NULL
) STRICT;
CREATE INDEX runs_company_created ON runs(company_id, created_at DESC, id DESC);
CREATE INDEX runs_agent ON runs(agent_id, status);
-- Sweeper pass 1 reads only running runs, ordered by lease.
CREATE INDEX runs_running_lease ON runs(lease_expires_at) WHERE status = 'running';

CREATE TABLE issues (
    id                       TEXT PRIMARY KEY,
    company_id               TEXT NOT NULL REFERENCES companies(id),
    identifier               TEXT NOT NULL UNIQUE, -- PREFIX-N, upper case
    title                    TEXT NOT NULL,
    description              TEXT NOT NULL DEFAULT '',
    status                   TEXT NOT NULL CHECK (status IN ('backlog','todo','in_progress','in_review','blocked','done','cancelled')),
    priority                 TEXT NOT NULL CHECK (priority IN ('critical','high','medium','low')),
    priority_rank            INTEGER NOT NULL, -- 0 critical .. 3 low, for "most urgent first"
    assignee_agent_id        TEXT REFERENCES agents(id),
    checkout_run_id          TEXT,
    checkout_epoch           INTEGER NOT NULL DEFAULT 0,
    execution_run_id         TEXT,
    execution_agent_name_key TEXT,
    execution_locked_at      INTEGER,
    started_at               INTEGER,
    completed_at             INTEGER,
    cancelled_at             INTEGER,
    created_at               INTEGER NOT NULL,
    updated_at               INTEGER NOT NULL,
    -- L7, enforced by the database as a last line of defence.
    CHECK (checkout_run_id IS NULL OR (status = 'in_progress' AND execution_run_id = checkout_run_id))
) STRICT;
CREATE INDEX issues_company_created ON issues(company_id, created_at DESC, id DESC);
CREATE INDEX issues_assignee_status ON issues(assignee_agent_id, status, priority_rank, created_at);
CREATE INDEX issues_company_status ON issues(company_id, status, priority_rank, created_at);
-- Sweeper pass 2 and lock-release-by-run read only locked rows: the partial
-- indexes keep their cost proportional to the number of locked issues.
CREATE INDEX issues_checkout_run ON issues(checkout_run_id) WHERE checkout_run_id IS NOT NULL;
CREATE INDEX issues_execution_run ON issues(execution_run_id) WHERE execution_run_id IS NOT NULL;

CREATE TABLE comments (
    id              TEXT PRIMARY KEY,
    company_id      TEXT NOT NULL REFERENCES companies(id),
    issue_id        TEXT NOT NULL REFERENCES issues(id),
    body            TEXT NOT NULL,
    author_agent_id TEXT,
    author_board    INTEGER NOT NULL DEFAULT 0,
    run_id          TEXT,
    seq             INTEGER NOT NULL, -- insertion order within the issue (1, 2, ...)
    created_at      INTEGER NOT NULL
) STRICT;
CREATE INDEX comments_issue ON comments(issue_id, seq);

-- Append-only: rows are never deleted, so the rowid alias id (max + 1) is
-- monotonic without AUTOINCREMENT (which would write sqlite_sequence in every
-- transaction that logs a row).
CREATE TABLE activity (
    id          INTEGER PRIMARY KEY,
    company_id  TEXT NOT NULL,
    actor_type  TEXT NOT NULL CHECK (actor_type IN ('agent','board','system')),
    actor_id    TEXT NOT NULL,
    run_id      TEXT,
    action      TEXT NOT NULL,
    entity_type TEXT NOT NULL,
    entity_id   TEXT NOT NULL,
    details     TEXT NOT NULL DEFAULT '{}',
    created_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX activity_company ON activity(company_id, id DESC);
CREATE INDEX activity_entity ON activity(entity_id, id DESC);

CREATE TABLE idempotency_keys (
    actor_id     TEXT NOT NULL,
    key          TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    status_code  INTEGER NOT NULL DEFAULT 0,
    body         BLOB,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (actor_id, key)
) STRICT;
-- Expired records (older than 24 hours) are deleted by age.
CREATE INDEX idempotency_keys_created ON idempotency_keys(created_at);
