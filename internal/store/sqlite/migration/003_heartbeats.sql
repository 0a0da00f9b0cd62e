-- clasp schema v3: server-managed agents. An agent may have an
-- adapter config (JSON, validated by clasp.AdapterConfig.Normalize); runs
-- the server starts are "managed" and remember the start time of their
-- process (clock ticks since boot, /proc/<pid>/stat field 22) so that a
-- reused pid is not mistaken for the run's; a run is retried at most once
-- (unique retry_of_run_id); wake requests queue per agent.

-- +goose Up

ALTER TABLE agents ADD COLUMN adapter_config TEXT;

ALTER TABLE runs ADD COLUMN managed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN proc_start INTEGER;
CREATE UNIQUE INDEX runs_retry_of ON runs(retry_of_run_id) WHERE retry_of_run_id IS NOT NULL;
CREATE INDEX runs_managed_queued ON runs(created_at) WHERE status = 'queued' AND managed = 1;
CREATE INDEX runs_managed_running ON runs(host_id) WHERE status = 'running' AND managed = 1;

-- status: queued (it made run_id), coalesced (into run_id), deferred
-- (blocked_by_run_id holds the issue's execution lock), skipped.
CREATE TABLE wake_requests (
    id                TEXT PRIMARY KEY,
    company_id        TEXT NOT NULL REFERENCES companies(id),
    agent_id          TEXT NOT NULL REFERENCES agents(id),
    issue_id          TEXT,
    reason            TEXT NOT NULL,
    idempotency_key   TEXT,
    status            TEXT NOT NULL CHECK (status IN ('queued','coalesced','deferred','skipped')),
    run_id            TEXT,
    blocked_by_run_id TEXT,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX wake_requests_key ON wake_requests(agent_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX wake_requests_deferred ON wake_requests(blocked_by_run_id, created_at) WHERE status = 'deferred';
CREATE INDEX wake_requests_deferred_issue ON wake_requests(issue_id, created_at) WHERE status = 'deferred';
