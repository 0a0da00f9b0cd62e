-- Self-reported runs: opening one, its signs of life, and the
-- authentication of a run token. Times are unix microseconds (:now is the
-- write transaction's time, :ttl_us a lease in microseconds). A run is live
-- when it is queued, or running with a lease that has not expired.

-- name: RunOpen
-- A running run of active agent :agent with a lease of :ttl_us from now,
-- its issue (the reference :rid/:rident in the agent's company) when
-- :issue_ref is set, its token's hash and the hash of the API key it is
-- opened with (:key_hash, NULL for none), so that revoking the key ends it
-- (KeyEndRuns). When :max_live is positive the agent must have fewer live
-- runs than that; SQLite has one writer, so the count and the insert see
-- no concurrent open. No row when the agent is missing or terminated, the
-- issue is not found, or the agent is at its limit.
INSERT INTO runs (id, company_id, agent_id, status, invocation_source, issue_id, attempt,
	lease_expires_at, last_sign_of_life_at, started_at, token_hash, key_hash, created_at)
SELECT :id, a.company_id, a.id, 'running', :source, i.id, 1, :now + :ttl_us, :now, :now, :token_hash, :key_hash, :now
FROM agents a LEFT JOIN issues i ON :issue_ref <> '' AND i.company_id = a.company_id
	AND (i.id = :rid OR i.identifier = :rident)
WHERE a.id = :agent AND a.status <> 'terminated' AND (:issue_ref = '' OR i.id IS NOT NULL)
	AND (:max_live <= 0 OR (SELECT count(*) FROM runs r WHERE r.agent_id = :agent
		AND ({{run_live r}})) < :max_live)
RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at

-- name: RunGet
SELECT id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at
FROM runs WHERE id = :id

-- name: RunAuth
-- The run whose token has hash :hash, whether it is live (at :now, the
-- store clock), and its agent.
SELECT r.id, r.company_id, r.agent_id, r.status, r.invocation_source, r.issue_id, r.retry_of_run_id, r.attempt, r.pid,
	r.host_id, r.lease_expires_at, r.last_sign_of_life_at, r.started_at, r.finished_at, r.exit_code, r.error_code, r.error,
	r.created_at,
	({{run_live r}}),
	a.id, a.company_id, a.name, a.name_key, a.role, a.status, a.created_at, a.last_heartbeat_at
FROM runs r JOIN agents a ON a.id = r.agent_id WHERE r.token_hash = :hash

-- name: RunTouch
-- A live run's sign of life renews its lease to :ttl_us from now, one
-- conditional write (a run that is terminal or lost is not revived).
UPDATE runs SET
	lease_expires_at = :now + :ttl_us,
	last_sign_of_life_at = :now
WHERE id = :run AND agent_id = :agent
	AND ({{run_live -}})
RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at

-- name: RunRecent
-- Run :run of agent :agent while it is live and its last sign of life is
-- less than :min_us microseconds old (at :now, the store clock): a sign of
-- life may skip renewing its lease. No row otherwise.
SELECT id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at
FROM runs WHERE id = :run AND agent_id = :agent AND ({{run_live -}}) AND last_sign_of_life_at > :now - :min_us

-- name: RunReplayOpen
-- A replayed open (Idempotency-Key) renews the lease of the run it opened
-- first as a sign of life, only while the run is live and its token hash
-- is the replay's (the token already given out stays valid and is
-- answered again), in one conditional write.
UPDATE runs SET
	lease_expires_at = :now + :ttl_us,
	last_sign_of_life_at = :now
WHERE id = :id AND agent_id = :agent AND token_hash IS :token_hash
	AND ({{run_live -}})
RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at
