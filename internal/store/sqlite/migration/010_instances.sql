-- clasp schema v10: server instances. Every `clasp serve` process that runs
-- managed agents registers one row (a fresh id per process, its machine,
-- its own pid and process start time) and renews its lease while it
-- lives; runs.host_id names the instance that started (or took over) the
-- run's process. A server on the same machine takes over an instance whose
-- lease ran out or whose process is gone (a restart), moving its running
-- runs to itself. The index finds an instance's runs with a process, which
-- a take-over inspects (re-adopt, or kill what outlived its run). The
-- PostgreSQL schema v8 does the same.

-- +goose Up
CREATE TABLE instances (
    id               TEXT PRIMARY KEY,
    host             TEXT NOT NULL,
    pid              INTEGER NOT NULL,
    proc_start       INTEGER NOT NULL,
    started_at       INTEGER NOT NULL,
    lease_expires_at INTEGER NOT NULL
);
CREATE INDEX instances_host ON instances(host);
CREATE INDEX runs_managed_process ON runs(host_id) WHERE managed = 1 AND pid IS NOT NULL;
