-- Server-managed agents: adapter configs, wake requests, and the life
-- cycle of the runs the heartbeat scheduler starts (store.HeartbeatTx).
-- They run in the store's write transaction, which holds SQLite's write
-- lock from its first statement; each rule is one conditional statement.
-- Times are unix microseconds (:now is the write transaction's time, :ttl_us
-- a lease in microseconds). A run is live when it is queued, or running
-- with a lease that has not expired.

-- name: AgentAdapterSet
-- No row: the agent is missing or terminated (its adapter is final).
UPDATE agents SET adapter_config = :config WHERE id = :agent AND status <> 'terminated'
RETURNING company_id

-- name: AgentAdapterGet
SELECT adapter_config FROM agents WHERE id = :agent

-- name: AgentAdapterList
-- Every non-terminated agent with an adapter config.
SELECT id, company_id, name, name_key, role, status, created_at, last_heartbeat_at, adapter_config
FROM agents WHERE adapter_config IS NOT NULL AND status <> 'terminated' ORDER BY created_at, id

-- name: AgentWithAdapter
SELECT id, company_id, name, name_key, role, status, created_at, last_heartbeat_at, adapter_config
FROM agents WHERE id = :agent

-- name: WakeByKey
-- The wake request agent :agent recorded with idempotency key :key.
SELECT id, status, run_id, blocked_by_run_id, request_hash, company_id FROM wake_requests
WHERE agent_id = :agent AND idempotency_key = :key

-- name: WakeIssueLocks
-- What a wake decides on: the issue's status, assignee and lock holders.
SELECT status, assignee_agent_id, checkout_run_id, execution_run_id, escalated_at IS NOT NULL FROM issues WHERE id = :issue

-- name: WakeQueuedRun
-- The agent's oldest queued managed run for issue :issue (NULL: for no issue).
SELECT id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at
FROM runs WHERE agent_id = :agent AND status = 'queued' AND managed = 1 AND issue_id IS :issue
ORDER BY created_at LIMIT 1

-- name: WakeTakeExecution
-- A run :run queued for agent :agent takes issue :issue's execution lock
-- when the issue may be worked by the agent (store.WakeIssueRefusal,
-- checked first for the error's reason) and both lock columns are empty or
-- name dead runs; a dead checkout lock is cleared in the same write (no
-- lock stays pinned to a dead run), so L7 holds. Matching nothing means a
-- live run holds the issue.
UPDATE issues SET
	execution_run_id = :run,
	execution_agent_name_key = (SELECT a.name_key FROM agents a WHERE a.id = :agent),
	execution_locked_at = :now,
	checkout_run_id = NULL,
	updated_at = :now
WHERE id = :issue
	-- L1: the issue is the agent's or unassigned (and not closed)
	AND status NOT IN ('done', 'cancelled')
	-- E3: no wake takes an escalated issue
	AND escalated_at IS NULL
	AND (assignee_agent_id IS NULL OR assignee_agent_id = :agent)
	-- L1: both lock columns are empty or name dead runs (a dead holder is displaced, L3)
	AND (execution_run_id IS NULL OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = issues.execution_run_id
		AND ({{run_live r}})))
	AND (checkout_run_id IS NULL OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = issues.checkout_run_id
		AND ({{run_live r}})))

-- name: RunInsertQueued
-- A queued managed run (a retry when :retry_of is set: unique
-- retry_of_run_id, so a second retry of one run inserts nothing).
INSERT INTO runs (id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id,
	attempt, managed, created_at)
VALUES (:id, :company, :agent, 'queued', :source, :issue, :retry_of, :attempt, 1, :now)
ON CONFLICT DO NOTHING
RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at

-- name: WakeInsert
INSERT INTO wake_requests (id, company_id, agent_id, issue_id, reason, idempotency_key,
	status, run_id, blocked_by_run_id, created_at, updated_at, request_hash)
VALUES (:id, :company, :agent, :issue, :reason, :key, :status, :run, :blocked_by, :now, :now, :hash)

-- name: WakeDeferredList
-- The deferred wakes blocked by any run of :runs (a JSON array of ids),
-- oldest first.
SELECT id, company_id, agent_id, coalesce(issue_id, ''), reason, blocked_by_run_id FROM wake_requests
WHERE status = 'deferred' AND blocked_by_run_id IN (SELECT value FROM json_each(:runs))
ORDER BY created_at, id

-- name: WakePromote
-- A deferred wake's outcome, if it is still deferred.
UPDATE wake_requests SET status = :status, run_id = :run, blocked_by_run_id = :blocked_by, updated_at = :now
WHERE id = :id AND status = 'deferred'

-- name: WakeSkipDeferred
-- The deferred wakes of a paused agent are skipped.
UPDATE wake_requests SET status = 'skipped', updated_at = :now WHERE agent_id = :agent AND status = 'deferred'

-- name: WakeBlockingDead
-- The runs blocking a deferred wake that are not live (terminal, lost or
-- missing).
SELECT DISTINCT w.blocked_by_run_id FROM wake_requests w
WHERE w.status = 'deferred' AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = w.blocked_by_run_id
	AND ({{run_live r}}))

-- name: RunsDead
-- Those of :runs (a JSON array of ids) that are not live.
SELECT u.value FROM json_each(:runs) u WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = u.value
	AND ({{run_live r}}))

-- name: RunQueuedManaged
-- Queued managed runs of active agents with an adapter, oldest first.
SELECT id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at,
	coalesce(proc_start, 0)
FROM runs WHERE status = 'queued' AND managed = 1
	AND agent_id IN (SELECT id FROM agents WHERE status = 'active' AND adapter_config IS NOT NULL)
ORDER BY created_at, id LIMIT :limit

-- name: RunRunningOnHost
SELECT id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at,
	coalesce(proc_start, 0)
FROM runs WHERE status = 'running' AND managed = 1 AND host_id = :host ORDER BY created_at, id

-- name: RunStart
-- A queued run starts on :host when its agent is active and has fewer
-- than :max running runs with a live lease.
UPDATE runs SET
	status = 'running', host_id = :host, token_hash = :hash, started_at = :now,
	lease_expires_at = :now + :ttl_us, last_sign_of_life_at = :now
WHERE id = :run AND status = 'queued'
	AND EXISTS (SELECT 1 FROM agents a WHERE a.id = runs.agent_id AND a.status = 'active')
	AND (SELECT count(*) FROM runs r2 WHERE r2.agent_id = runs.agent_id AND {{run_leased r2}}) < :max
RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at

-- name: RunSetProcess
UPDATE runs SET pid = :pid, proc_start = :proc_start WHERE id = :run AND host_id = :host AND status = 'running'

-- name: RunRenew
-- A live running run of :host gets a new lease (a sign of life the server
-- gives while the process lives).
UPDATE runs SET lease_expires_at = :now + :ttl_us, last_sign_of_life_at = :now
WHERE id = :run AND host_id = :host AND {{run_leased -}}

-- name: RunProcessLost
-- A running managed run of :host whose process is gone fails.
UPDATE runs SET
	status = 'failed', error_code = 'process_lost', error = :error, finished_at = :now
WHERE id = :run AND status = 'running' AND managed = 1 AND host_id = :host
RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at

-- name: RunHeldIssue
-- The issue whose execution lock a lost run :lost hands to its retry: its
-- own issue :issue if it still holds that lock, else the issue it locked
-- last (a run woken without an issue that checked one out). No row: it
-- holds no execution lock.
SELECT id FROM issues WHERE execution_run_id = :lost
ORDER BY (id IS :issue) DESC, execution_locked_at DESC, id LIMIT 1

-- name: RunMoveExecution
-- In one statement, the execution lock of issue :issue, still naming the
-- lost run :lost, moves to its retry :retry, and the lost run's checkout
-- lock is cleared (the dead run owns nothing). Other locks naming the lost
-- run are released next (L6).
UPDATE issues SET
	execution_run_id = :retry,
	execution_locked_at = :now,
	checkout_run_id = CASE WHEN checkout_run_id = :lost THEN NULL ELSE checkout_run_id END,
	updated_at = :now
WHERE id = :issue AND execution_run_id = :lost
RETURNING id, company_id

-- name: RunCancelQueued
-- The queued runs of a paused agent are cancelled.
UPDATE runs SET status = 'cancelled', error_code = 'agent_paused', error = 'the agent was paused', finished_at = :now
WHERE agent_id = :agent AND status = 'queued'
RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at
