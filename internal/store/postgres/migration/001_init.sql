-- clasp schema v1 for PostgreSQL (SPEC section 1): the tables and columns of
-- the SQLite schema (internal/store/sqlite/migration/001_init.sql) in native
-- types. Ids are UUID text (lower case) kept as text for parity with SQLite
-- (a malformed id in a request is then "not found", never a cast error), with
-- the binary "C" collation so that keyset order is byte order on every
-- server. Times are timestamptz (microseconds, like SQLite's integers).
-- activity.id is an identity column (monotonic, for resume). Applied by
-- goose (internal/store/postgres/migrate.go) under a pg_advisory_lock; there
-- are no down migrations.

-- +goose Up

CREATE TABLE settings (
    key   text COLLATE "C" PRIMARY KEY,
    value text NOT NULL
);

CREATE TABLE companies (
    id            text COLLATE "C" PRIMARY KEY,
    name          text NOT NULL,
    issue_prefix  text COLLATE "C" NOT NULL UNIQUE,
    issue_counter bigint NOT NULL DEFAULT 0, -- last N handed out as PREFIX-N (row lock serialises creators)
    created_at    timestamptz NOT NULL
);

CREATE TABLE agents (
    id                text COLLATE "C" PRIMARY KEY,
    company_id        text COLLATE "C" NOT NULL REFERENCES companies(id),
    name              text NOT NULL,
    name_key          text COLLATE "C" NOT NULL,
    role              text NOT NULL DEFAULT '',
    status            text NOT NULL DEFAULT 'active' CHECK (status IN ('active','paused','terminated')),
    created_at        timestamptz NOT NULL,
    last_heartbeat_at timestamptz,
    UNIQUE (company_id, name_key)
);
CREATE INDEX agents_company_created ON agents(company_id, created_at, id);

CREATE TABLE agent_api_keys (
    id           text COLLATE "C" PRIMARY KEY,
    agent_id     text COLLATE "C" NOT NULL REFERENCES agents(id),
    prefix       text NOT NULL,
    token_hash   text COLLATE "C" NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL,
    last_used_at timestamptz,
    revoked_at   timestamptz
);
CREATE INDEX agent_api_keys_agent ON agent_api_keys(agent_id);

CREATE TABLE runs (
    id                   text COLLATE "C" PRIMARY KEY,
    company_id           text COLLATE "C" NOT NULL REFERENCES companies(id),
    agent_id             text COLLATE "C" NOT NULL REFERENCES agents(id),
    status               text NOT NULL CHECK (status IN ('queued','running','succeeded','failed','cancelled','timed_out')),
    invocation_source    text NOT NULL DEFAULT 'self',
    issue_id             text COLLATE "C",
    retry_of_run_id      text COLLATE "C",
    attempt              integer NOT NULL DEFAULT 1,
    pid                  integer,
    host_id              text,
    lease_expires_at     timestamptz,
    last_sign_of_life_at timestamptz,
    started_at           timestamptz,
    finished_at          timestamptz,
    exit_code            integer,
    error_code           text,
    error                text,
    token_hash           text COLLATE "C" UNIQUE,
    created_at           timestamptz NOT NULL
);
CREATE INDEX runs_company_created ON runs(company_id, created_at DESC, id DESC);
CREATE INDEX runs_agent ON runs(agent_id, status);
-- Sweeper pass 1 reads only running runs, ordered by lease.
CREATE INDEX runs_running_lease ON runs(lease_expires_at) WHERE status = 'running';

CREATE TABLE issues (
    id                       text COLLATE "C" PRIMARY KEY,
    company_id               text COLLATE "C" NOT NULL REFERENCES companies(id),
    identifier               text COLLATE "C" NOT NULL UNIQUE, -- PREFIX-N, upper case
    title                    text NOT NULL,
    description              text NOT NULL DEFAULT '',
    status                   text NOT NULL CHECK (status IN ('backlog','todo','in_progress','in_review','blocked','done','cancelled')),
    priority                 text NOT NULL CHECK (priority IN ('critical','high','medium','low')),
    priority_rank            integer NOT NULL, -- 0 critical .. 3 low, for "most urgent first"
    assignee_agent_id        text COLLATE "C" REFERENCES agents(id),
    checkout_run_id          text COLLATE "C",
    checkout_epoch           bigint NOT NULL DEFAULT 0,
    execution_run_id         text COLLATE "C",
    execution_agent_name_key text,
    execution_locked_at      timestamptz,
    started_at               timestamptz,
    completed_at             timestamptz,
    cancelled_at             timestamptz,
    created_at               timestamptz NOT NULL,
    updated_at               timestamptz NOT NULL,
    -- L7, enforced by the database as a last line of defence.
    CONSTRAINT issues_l7 CHECK (checkout_run_id IS NULL OR (status = 'in_progress' AND execution_run_id = checkout_run_id))
);
CREATE INDEX issues_company_created ON issues(company_id, created_at DESC, id DESC);
CREATE INDEX issues_assignee_status ON issues(assignee_agent_id, status, priority_rank, created_at);
CREATE INDEX issues_company_status ON issues(company_id, status, priority_rank, created_at);
-- The end of a run (L6) finds its locks through these; the sweeper's pass 2
-- reads only locked rows (issues_locked, in id order for its FOR UPDATE
-- batches). The partial indexes keep their cost proportional to the number
-- of locked issues.
CREATE INDEX issues_checkout_run ON issues(checkout_run_id) WHERE checkout_run_id IS NOT NULL;
CREATE INDEX issues_execution_run ON issues(execution_run_id) WHERE execution_run_id IS NOT NULL;
CREATE INDEX issues_locked ON issues(id) WHERE checkout_run_id IS NOT NULL OR execution_run_id IS NOT NULL;

CREATE TABLE comments (
    id              text COLLATE "C" PRIMARY KEY,
    company_id      text COLLATE "C" NOT NULL REFERENCES companies(id),
    issue_id        text COLLATE "C" NOT NULL REFERENCES issues(id),
    body            text NOT NULL,
    author_agent_id text COLLATE "C",
    author_board    boolean NOT NULL DEFAULT false,
    run_id          text COLLATE "C",
    -- insertion order: an identity (unique across concurrent writers, which a
    -- max(seq)+1 per issue is not under READ COMMITTED); lists order by it.
    seq             bigint GENERATED ALWAYS AS IDENTITY,
    created_at      timestamptz NOT NULL
);
CREATE INDEX comments_issue ON comments(issue_id, seq);

-- Append-only. id comes from an identity sequence: it increases in the order
-- rows are inserted, which across concurrent transactions is not quite the
-- order they commit in; tx_id (the writing transaction) lets a reader that
-- must never skip a row (an event stream resuming from an id) hold back rows
-- of transactions still in flight, e.g. by reading only up to
-- pg_snapshot_xmin(pg_current_snapshot()).
CREATE TABLE activity (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    company_id  text COLLATE "C" NOT NULL,
    actor_type  text NOT NULL CHECK (actor_type IN ('agent','board','system')),
    actor_id    text COLLATE "C" NOT NULL,
    run_id      text COLLATE "C",
    action      text COLLATE "C" NOT NULL,
    entity_type text NOT NULL,
    entity_id   text COLLATE "C" NOT NULL,
    details     jsonb NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    tx_id       xid8 NOT NULL DEFAULT pg_current_xact_id()
);
CREATE INDEX activity_company ON activity(company_id, id DESC);
CREATE INDEX activity_entity ON activity(entity_id, id DESC);

-- Idempotency-Key records (SPEC section 3, store.IdempotencyParams): the
-- resource a creating request made, written in the creating transaction;
-- the primary key makes a concurrent duplicate fail (and then replay).
CREATE TABLE idempotency_keys (
    actor_id      text COLLATE "C" NOT NULL,
    key           text COLLATE "C" NOT NULL,
    request_hash  text NOT NULL,
    resource_type text NOT NULL CHECK (resource_type IN ('issue','comment','run')),
    resource_id   text COLLATE "C" NOT NULL,
    created_at    timestamptz NOT NULL,
    PRIMARY KEY (actor_id, key)
);
-- Expired records (older than 24 hours) are deleted by age.
CREATE INDEX idempotency_keys_created ON idempotency_keys(created_at);
