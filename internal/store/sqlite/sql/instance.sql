-- Server instances: each `clasp serve` process that runs managed agents
-- holds a row with a lease; runs.host_id names the instance that owns a
-- run's process. Times are unix microseconds (:now is the write
-- transaction's time, :ttl_us a lease in microseconds).

-- name: InstanceRegister
-- Records instance :id, replacing a row of the same id.
INSERT INTO instances (id, host, pid, proc_start, started_at, lease_expires_at)
VALUES (:id, :host, :pid, :proc_start, :now, :now + :ttl_us)
ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, proc_start = excluded.proc_start,
	started_at = excluded.started_at, lease_expires_at = excluded.lease_expires_at

-- name: InstanceRenew
-- No row: the instance is gone (another one took it over).
UPDATE instances SET lease_expires_at = :now + :ttl_us WHERE id = :id

-- name: InstanceRelease
-- Ends the lease now (never extends it).
UPDATE instances SET lease_expires_at = min(lease_expires_at, :now) WHERE id = :id

-- name: InstanceList
-- The instances of :host, expired as of :now.
SELECT id, host, pid, proc_start, started_at, lease_expires_at, lease_expires_at <= :now
FROM instances WHERE host = :host ORDER BY started_at, id

-- name: InstanceTakeOver
-- Takes instance :id over if its lease still ends at :lease as read: of two
-- instances taking over the same one, exactly one deletes the row; one
-- that renewed meanwhile is not taken.
DELETE FROM instances WHERE id = :id AND lease_expires_at = :lease

-- name: InstanceRunsWithProcess
-- The managed runs of instance :host whose process is recorded, running
-- or ended.
SELECT id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at,
	coalesce(proc_start, 0)
FROM runs WHERE host_id = :host AND managed = 1 AND pid IS NOT NULL
ORDER BY created_at, id

-- name: InstanceMoveRuns
-- The running managed runs of instance :dead move to instance :by.
UPDATE runs SET host_id = :by WHERE host_id = :dead AND status = 'running' AND managed = 1
