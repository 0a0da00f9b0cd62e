-- Self-reported runs: opening one, its signs of life, and the
-- authentication of a run token. Times are unix microseconds (:now is the
-- write transaction's time, :ttl a lease in microseconds). A run is live
-- when it is queued, or running with a lease that has not expired.

-- name: RunOpen
-- A running run with a lease of :ttl from now, its token's hash and the
-- hash of the API key it is opened with (:key_hash, NULL for none), so
-- that revoking the key ends it (KeyEndRuns). When :max_live is positive
-- the agent must have fewer live runs than that; SQLite has one writer,
-- so the count and the insert see no concurrent open. No row at the
-- limit.
INSERT INTO runs (id, company_id, agent_id, status, invocation_source, issue_id, attempt,
	lease_expires_at, last_sign_of_life_at, started_at, token_hash, key_hash, created_at)
SELECT :id, :company, :agent, 'running', :source, :issue, 1, :now + :ttl, :now, :now, :hash, :key_hash, :now
WHERE :max_live <= 0 OR (SELECT count(*) FROM runs r WHERE r.agent_id = :agent
	AND ({{run_live r}})) < :max_live
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
-- A live run's sign of life renews its lease, one conditional write (a
-- run that is terminal or lost is not revived).
UPDATE runs SET
	lease_expires_at = :now + :ttl,
	last_sign_of_life_at = :now
WHERE id = :run AND agent_id = :agent
	AND ({{run_live -}})
RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at

-- name: RunReplayOpen
-- A replayed open (Idempotency-Key) renews the lease of the run it opened
-- first as a sign of life, only while the run is live and its token hash
-- is the replay's (the token already given out stays valid and is
-- answered again), in one conditional write.
UPDATE runs SET
	lease_expires_at = :now + :ttl,
	last_sign_of_life_at = :now
WHERE id = :run AND agent_id = :agent AND token_hash IS :hash
	AND ({{run_live -}})
RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at
