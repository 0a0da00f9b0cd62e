-- clasp schema v2 for PostgreSQL: server-managed agents, as the
-- SQLite schema v3. An agent may have an adapter config (JSON text,
-- validated by clasp.AdapterConfig.Normalize); runs the server starts are
-- "managed" and remember the start time of their process (clock ticks since
-- boot, /proc/<pid>/stat field 22) so that a reused pid is not mistaken for
-- the run's; a run is retried at most once (unique retry_of_run_id); wake
-- requests queue per agent.

-- +goose Up
ALTER TABLE agents ADD COLUMN adapter_config text;

ALTER TABLE runs ADD COLUMN managed boolean NOT NULL DEFAULT false;
ALTER TABLE runs ADD COLUMN proc_start bigint;
CREATE UNIQUE INDEX runs_retry_of ON runs(retry_of_run_id) WHERE retry_of_run_id IS NOT NULL;
CREATE INDEX runs_managed_queued ON runs(created_at) WHERE status = 'queued' AND managed;
CREATE INDEX runs_managed_running ON runs(host_id) WHERE status = 'running' AND managed;

CREATE TABLE wake_requests (
    id                text COLLATE "C" PRIMARY KEY,
    company_id        text COLLATE "C" NOT NULL REFERENCES companies(id),
    agent_id          text COLLATE "C" NOT NULL REFERENCES agents(id),
    issue_id          text COLLATE "C",
    reason            text NOT NULL,
    idempotency_key   text,
    status            text NOT NULL CHECK (status IN ('queued','coalesced','deferred','skipped')),
    run_id            text COLLATE "C",
    blocked_by_run_id text COLLATE "C",
    created_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at        timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX wake_requests_key ON wake_requests(agent_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX wake_requests_deferred ON wake_requests(blocked_by_run_id, created_at) WHERE status = 'deferred';
