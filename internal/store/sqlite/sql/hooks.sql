-- Raw writes of the test hooks (TestHooks, tests only): states the store
-- API cannot reach, with no activity rows.

-- name: HookDeleteRun
DELETE FROM runs WHERE id = :run

-- name: HookSetRunLease
-- The lease ends one second before :now; the status stays (a lost run not yet swept).
UPDATE runs SET lease_expires_at = :now - 1000000 WHERE id = :run

-- name: HookSetRunStatus
-- finished_at changes only for a terminal status (:terminal).
UPDATE runs SET status = :status, finished_at = CASE WHEN :terminal THEN :now ELSE finished_at END WHERE id = :run

-- name: HookForceIssueLocks
-- The execution name key and time follow the execution lock.
UPDATE issues SET status = :status, assignee_agent_id = :assignee, checkout_run_id = :checkout, execution_run_id = :execution,
	execution_agent_name_key = CASE WHEN :execution IS NULL THEN NULL
		ELSE (SELECT a.name_key FROM runs r JOIN agents a ON a.id = r.agent_id WHERE r.id = :execution) END,
	execution_locked_at = CASE WHEN :execution IS NULL THEN NULL ELSE :now END
WHERE id = :id
