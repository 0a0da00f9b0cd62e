-- Raw writes of the test hooks (TestHooks, tests only): states the store
-- API cannot reach, with no activity rows.

-- name: HookDeleteRun
DELETE FROM runs WHERE id = @run::text

-- name: HookSetRunLease
-- The lease ends one second ago; the status stays (a lost run not yet swept).
UPDATE runs SET lease_expires_at = now() - interval '1 second' WHERE id = @run::text

-- name: HookSetRunStatus
-- finished_at changes only for a terminal status (@terminal).
UPDATE runs SET status = @status::text, finished_at = CASE WHEN @terminal::boolean THEN now() ELSE finished_at END
WHERE id = @run::text

-- name: HookForceIssueLocks
-- The execution name key and time follow the execution lock.
UPDATE issues SET status = @status::text, assignee_agent_id = @assignee::text, checkout_run_id = @checkout::text,
	execution_run_id = @execution::text,
	execution_agent_name_key = CASE WHEN @execution::text IS NULL THEN NULL
		ELSE (SELECT a.name_key FROM runs r JOIN agents a ON a.id = r.agent_id WHERE r.id = @execution::text) END,
	execution_locked_at = CASE WHEN @execution::text IS NULL THEN NULL ELSE now() END
WHERE id = @id::text

-- name: HookDropL7
ALTER TABLE issues DROP CONSTRAINT issues_l7

-- name: HookAddL7
-- Checked for every later write, not for the rows already there.
ALTER TABLE issues ADD CONSTRAINT issues_l7
	CHECK (checkout_run_id IS NULL OR (status = 'in_progress' AND execution_run_id = checkout_run_id)) NOT VALID
