-- Server-managed agents: adapter configs, wake requests, and the life
-- cycle of the runs the heartbeat scheduler starts (store.HeartbeatTx).
-- The heartbeat writes of one agent are serialised by AgentLock, the issue
-- a wake decides on is locked by WakeIssueLocks; each rule is one
-- conditional statement. now() is the transaction's start, the database's
-- clock; @ttl_us is a lease in microseconds. A run is live when it is
-- queued, or running with a lease that has not expired.

-- name: AgentLock
-- A transaction advisory lock on agent @agent, across replicas
-- (coalescing, idempotency keys and the running-slot count of one agent).
SELECT pg_advisory_xact_lock(hashtextextended('clasp.agent:' || @agent::text, 0))

-- name: AgentAdapterSet
-- No row: the agent is missing or terminated (its adapter is final).
UPDATE agents SET adapter_config = @config::text WHERE id = @agent::text AND status <> 'terminated'
RETURNING company_id

-- name: AgentAdapterGet
SELECT adapter_config FROM agents WHERE id = @agent::text

-- name: AgentAdapterList
-- Every non-terminated agent with an adapter config.
SELECT id, company_id, name, name_key, role, status, created_at, last_heartbeat_at, adapter_config
FROM agents WHERE adapter_config IS NOT NULL AND status <> 'terminated' ORDER BY created_at, id

-- name: AgentWithAdapter
SELECT id, company_id, name, name_key, role, status, created_at, last_heartbeat_at, adapter_config
FROM agents WHERE id = @agent::text

-- name: WakeByKey
-- The wake request agent @agent recorded with idempotency key @key.
SELECT id, status, run_id, blocked_by_run_id, request_hash, company_id FROM wake_requests
WHERE agent_id = @agent::text AND idempotency_key = @key::text

-- name: WakeIssueLocks
-- What a wake decides on: the issue's status, assignee and lock holders,
-- locked so that no reassignment or close lands before the wake's lock
-- write.
SELECT status, assignee_agent_id, checkout_run_id, execution_run_id, escalated_at IS NOT NULL FROM issues WHERE id = @issue::text FOR UPDATE

-- name: WakeQueuedRun
-- The agent's oldest queued managed run for issue @issue (NULL: for no issue).
SELECT id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at
FROM runs WHERE agent_id = @agent::text AND status = 'queued' AND managed AND issue_id IS NOT DISTINCT FROM @issue::text
ORDER BY created_at LIMIT 1

-- name: WakeTakeExecution
-- A run @run queued for agent @agent takes issue @issue's execution lock
-- when the issue may be worked by the agent (store.WakeIssueRefusal,
-- checked first for the error's reason) and both lock columns are empty or
-- name dead runs; a dead checkout lock is cleared in the same write (no
-- lock stays pinned to a dead run), so L7 holds. Matching nothing means a
-- live run holds the issue.
UPDATE issues i SET
	execution_run_id = @run::text,
	execution_agent_name_key = (SELECT a.name_key FROM agents a WHERE a.id = @agent::text),
	execution_locked_at = now(),
	checkout_run_id = NULL,
	updated_at = now()
WHERE i.id = @issue::text
	-- L1: the issue is the agent's or unassigned (and not closed)
	AND i.status NOT IN ('done', 'cancelled')
	-- E3: no wake takes an escalated issue
	AND i.escalated_at IS NULL
	AND (i.assignee_agent_id IS NULL OR i.assignee_agent_id = @agent::text)
	-- L1: both lock columns are empty or name dead runs (a dead holder is displaced, L3)
	AND (i.execution_run_id IS NULL OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = i.execution_run_id
		AND ({{run_live r}})))
	AND (i.checkout_run_id IS NULL OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = i.checkout_run_id
		AND ({{run_live r}})))

-- name: RunInsertQueued
-- A queued managed run. created_at is the wall clock, not the
-- transaction's start, so that runs queued in one transaction keep their
-- order.
INSERT INTO runs (id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id,
	attempt, managed, created_at)
VALUES (@id::text, @company::text, @agent::text, 'queued', @source::text, @issue::text, @retry_of::text, @attempt::integer,
	true, clock_timestamp())
ON CONFLICT DO NOTHING
RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at

-- name: WakeInsert
INSERT INTO wake_requests (id, company_id, agent_id, issue_id, reason, idempotency_key,
	status, run_id, blocked_by_run_id, request_hash)
VALUES (@id::text, @company::text, @agent::text, @issue::text, @reason::text, @key::text, @status::text, @run::text,
	@blocked_by::text, @hash::text)

-- name: WakeDeferredList
-- The deferred wakes blocked by any run of @runs, oldest first, locked.
SELECT id, company_id, agent_id, coalesce(issue_id, ''), reason, blocked_by_run_id FROM wake_requests
WHERE status = 'deferred' AND blocked_by_run_id = ANY(@runs::text[])
ORDER BY created_at, id FOR UPDATE

-- name: WakePromote
-- A deferred wake's outcome, if it is still deferred.
UPDATE wake_requests SET status = @status::text, run_id = @run::text, blocked_by_run_id = @blocked_by::text, updated_at = now()
WHERE id = @id::text AND status = 'deferred'

-- name: WakeSkipDeferred
-- The deferred wakes of a paused agent are skipped.
UPDATE wake_requests SET status = 'skipped', updated_at = now() WHERE agent_id = @agent::text AND status = 'deferred'

-- name: WakeBlockingDead
-- The runs blocking a deferred wake that are not live (terminal, lost or
-- missing).
SELECT DISTINCT w.blocked_by_run_id FROM wake_requests w
WHERE w.status = 'deferred' AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = w.blocked_by_run_id
	AND ({{run_live r}}))

-- name: RunsDead
-- Those of @runs that are not live.
SELECT u.id FROM unnest(@runs::text[]) AS u(id) WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = u.id
	AND ({{run_live r}}))

-- name: RunQueuedManaged
-- Queued managed runs of active agents with an adapter, oldest first.
SELECT id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at,
	coalesce(proc_start, 0)
FROM runs WHERE status = 'queued' AND managed
	AND agent_id IN (SELECT id FROM agents WHERE status = 'active' AND adapter_config IS NOT NULL)
ORDER BY created_at, id LIMIT @limit::integer

-- name: RunRunningOnHost
SELECT id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at,
	coalesce(proc_start, 0)
FROM runs WHERE status = 'running' AND managed AND host_id = @host::text ORDER BY created_at, id

-- name: RunStart
-- A queued run starts on @host when its agent is active and has fewer
-- than @max running runs with a live lease (the count is serialised by
-- AgentLock).
UPDATE runs r SET
	status = 'running', host_id = @host::text, token_hash = @hash::text, started_at = now(),
	lease_expires_at = now() + @ttl_us::bigint * interval '1 microsecond', last_sign_of_life_at = now()
WHERE r.id = @run::text AND r.status = 'queued'
	AND EXISTS (SELECT 1 FROM agents a WHERE a.id = r.agent_id AND a.status = 'active')
	AND (SELECT count(*) FROM runs r2 WHERE r2.agent_id = r.agent_id AND {{run_leased r2}}) < @max::integer
RETURNING r.id, r.company_id, r.agent_id, r.status, r.invocation_source, r.issue_id, r.retry_of_run_id, r.attempt, r.pid,
	r.host_id, r.lease_expires_at, r.last_sign_of_life_at, r.started_at, r.finished_at, r.exit_code, r.error_code, r.error,
	r.created_at

-- name: RunSetProcess
UPDATE runs SET pid = @pid::integer, proc_start = @proc_start::bigint
WHERE id = @run::text AND host_id = @host::text AND status = 'running'

-- name: RunRenew
-- A live running run of @host gets a new lease (a sign of life the server
-- gives while the process lives).
UPDATE runs SET lease_expires_at = now() + @ttl_us::bigint * interval '1 microsecond', last_sign_of_life_at = now()
WHERE id = @run::text AND host_id = @host::text AND {{run_leased -}}

-- name: RunProcessLost
-- The process-loss rule in one statement: the running managed run of
-- @host becomes failed (process_lost); if it is attempt 1 and not retried
-- yet, its retry @retry_id is queued (attempt 2) for the issue whose
-- execution lock the lost run holds (its own issue if it still holds that
-- lock, else the one it locked last; without any, its own issue), and that
-- issue's execution lock moves to the retry while its checkout lock (the
-- lost run's) is cleared (the dead run owns nothing). Other locks naming
-- the lost run are released next (L6). The answer: the lost run and the
-- retry as JSON rows (NULL when none), and the [id, company_id] of each
-- issue whose lock moved.
WITH lost AS (
	UPDATE runs SET status = 'failed', error_code = 'process_lost', error = @error::text, finished_at = now()
	WHERE id = @run::text AND status = 'running' AND managed AND host_id = @host::text
	RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
		lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at
), held AS (
	SELECT i.id FROM issues i, lost WHERE i.execution_run_id = @run::text
	ORDER BY (i.id = lost.issue_id) DESC NULLS LAST, i.execution_locked_at DESC, i.id LIMIT 1
), retry AS (
	INSERT INTO runs (id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, managed, created_at)
	SELECT @retry_id::text, company_id, agent_id, 'queued', 'retry', coalesce((SELECT id FROM held), issue_id), id, 2, true,
		clock_timestamp()
	FROM lost WHERE attempt = 1 AND retry_of_run_id IS NULL
	ON CONFLICT DO NOTHING
	RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
		lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at
), moved AS (
	UPDATE issues i SET
		execution_run_id = (SELECT id FROM retry),
		execution_locked_at = now(),
		checkout_run_id = CASE WHEN i.checkout_run_id = @run::text THEN NULL ELSE i.checkout_run_id END,
		updated_at = now()
	WHERE i.id = (SELECT id FROM held) AND i.execution_run_id = @run::text AND EXISTS (SELECT 1 FROM retry)
	RETURNING i.id, i.company_id
)
SELECT (SELECT row_to_json(lost) FROM lost), (SELECT row_to_json(retry) FROM retry),
	(SELECT coalesce(json_agg(json_build_array(id, company_id)), '[]') FROM moved)

-- name: RunCancelQueued
-- The queued runs of a paused agent are cancelled.
UPDATE runs SET status = 'cancelled', error_code = 'agent_paused', error = 'the agent was paused', finished_at = now()
WHERE agent_id = @agent::text AND status = 'queued'
RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at
