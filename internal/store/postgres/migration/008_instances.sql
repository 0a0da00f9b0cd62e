-- clasp schema v8 for PostgreSQL: server instances, as the SQLite schema
-- v10. Every `clasp serve` process that runs managed agents registers one
-- row (a fresh id per process, its machine, its own pid and process start
-- time) and renews its lease while it lives; runs.host_id names the
-- instance that started (or took over) the run's process. A server on the
-- same machine takes over an instance whose lease ran out or whose process
-- is gone (a restart), moving its running runs to itself.

-- +goose Up
CREATE TABLE instances (
    id               text COLLATE "C" PRIMARY KEY,
    host             text NOT NULL,
    pid              integer NOT NULL,
    proc_start       bigint NOT NULL,
    started_at       timestamptz NOT NULL,
    lease_expires_at timestamptz NOT NULL
);
CREATE INDEX instances_host ON instances(host);
CREATE INDEX runs_managed_process ON runs(host_id) WHERE managed AND pid IS NOT NULL;
