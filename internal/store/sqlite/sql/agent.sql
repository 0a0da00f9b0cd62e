-- Agents, their API keys, and the authentication of a key. Times are unix
-- microseconds (:now is the write transaction's time, or the reader's
-- clock for a read).

-- name: AgentCreate
-- An active agent of company :company; no row when the company is missing.
INSERT INTO agents (id, company_id, name, name_key, role, status, created_at)
SELECT :id, c.id, :name, :name_key, :role, 'active', :now FROM companies c WHERE c.id = :company
RETURNING id, company_id, name, name_key, role, status, created_at, last_heartbeat_at

-- name: AgentGet
SELECT id, company_id, name, name_key, role, status, created_at, last_heartbeat_at FROM agents WHERE id = :id

-- name: AgentUpdate
-- Each column changes when its parameter is not NULL. Terminated is
-- final: no row for a change of a terminated agent to another status.
UPDATE agents SET
	status = coalesce(:status, status),
	name = coalesce(:name, name),
	name_key = coalesce(:name_key, name_key),
	role = coalesce(:role, role)
WHERE id = :id
	AND (status <> 'terminated' OR coalesce(:status, 'terminated') = 'terminated')
RETURNING id, company_id, name, name_key, role, status, created_at, last_heartbeat_at

-- name: AgentRevokeKeys
-- A terminated agent's keys are revoked.
UPDATE agent_api_keys SET revoked_at = :now WHERE agent_id = :agent AND revoked_at IS NULL

-- name: AgentEndRuns
-- The queued and running runs of an agent being terminated (lost ones
-- too) end as cancelled; their locks are released next (L6).
UPDATE runs SET
	status = 'cancelled',
	error_code = 'agent_terminated',
	error = coalesce(error, 'agent terminated'),
	finished_at = :now
WHERE agent_id = :agent AND status IN ('queued', 'running')
RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at

-- name: AgentUnassignActivity
-- L6, agent terminated: the activity rows of AgentUnassignIssues, written
-- just before it in the same write transaction from the issues it then
-- writes (the same WHERE; the transaction holds the write lock) as they
-- stand, and what it makes of them (no assignee, no lock, in_progress
-- becoming todo), as actor :actor_*. Per issue, in id order:
-- issue.released {previousCheckoutRunId, previousExecutionRunId,
-- unassigned: true, cause: "agent_terminated"} when a lock column is set
-- (L7), then issue.updated {cause: "agent_terminated", changes:
-- {assigneeAgentId: {from, to: null}, and status {from, to} when
-- in_progress becomes todo}, and locksCleared, previousCheckoutRunId,
-- previousExecutionRunId when a lock column is set}.
INSERT INTO activity
	(company_id, actor_type, actor_id, run_id, action, entity_type, entity_id, details, created_at, request_id)
SELECT company_id, :actor_type, :actor_id, :actor_run, action, 'issue', id, details, :now, :actor_request FROM (
	SELECT i.id, 1 AS ord, i.company_id, 'issue.released' AS action,
		json_object('previousCheckoutRunId', i.checkout_run_id, 'previousExecutionRunId', i.execution_run_id,
			'unassigned', json('true'), 'cause', 'agent_terminated') AS details
	FROM issues i WHERE i.assignee_agent_id = :agent AND i.status NOT IN ('done', 'cancelled')
		AND (i.checkout_run_id IS NOT NULL OR i.execution_run_id IS NOT NULL)
	UNION ALL
	SELECT i.id, 2, i.company_id, 'issue.updated',
		json_insert(json_object('cause', 'agent_terminated', 'changes', json_insert(
				json_object('assigneeAgentId', json_object('from', i.assignee_agent_id, 'to', NULL)),
				CASE WHEN i.status = 'in_progress' THEN '$.status' END, json_object('from', i.status, 'to', 'todo'))),
			CASE WHEN i.checkout_run_id IS NOT NULL OR i.execution_run_id IS NOT NULL THEN '$.locksCleared' END, json('true'),
			CASE WHEN i.checkout_run_id IS NOT NULL OR i.execution_run_id IS NOT NULL THEN '$.previousCheckoutRunId' END, i.checkout_run_id,
			CASE WHEN i.checkout_run_id IS NOT NULL OR i.execution_run_id IS NOT NULL THEN '$.previousExecutionRunId' END, i.execution_run_id)
	FROM issues i WHERE i.assignee_agent_id = :agent AND i.status NOT IN ('done', 'cancelled'))
ORDER BY id, ord

-- name: AgentUnassignIssues
-- L6, agent terminated: every issue assigned to agent :agent that is not
-- done or cancelled loses its assignee and, as at every change of
-- assignee, both locks (its runs' ends released theirs just before; left
-- are those of runs that ended earlier and were not swept yet);
-- in_progress becomes todo (as a release, L4); checkout_epoch stays. The
-- issues are then free for any agent's checkout and claim. Its activity
-- rows are AgentUnassignActivity's, written just before it.
UPDATE issues SET
	assignee_agent_id = NULL,
	status = CASE WHEN status = 'in_progress' THEN 'todo' ELSE status END,
	checkout_run_id = NULL,
	execution_run_id = NULL,
	execution_agent_name_key = NULL,
	execution_locked_at = NULL,
	updated_at = :now
WHERE assignee_agent_id = :agent AND status NOT IN ('done', 'cancelled')

-- name: AgentHeartbeat
UPDATE agents SET last_heartbeat_at = :now WHERE id = :agent

-- name: KeyCreate
-- A key hash of an existing agent, and the agent's company; no row when
-- the agent is missing.
INSERT INTO agent_api_keys (id, agent_id, prefix, token_hash, created_at, name)
SELECT :id, a.id, :prefix, :hash, :now, :name FROM agents a WHERE a.id = :agent
RETURNING id, agent_id, prefix, created_at, last_used_at, revoked_at, name,
	(SELECT company_id FROM agents WHERE agents.id = agent_api_keys.agent_id)

-- name: KeyEndRuns
-- The queued and running runs opened with key :id of agent :agent, while
-- the key is unrevoked, end as cancelled (key_revoked); their locks are
-- released next, then the key is revoked (KeyRevoke): whoever held the
-- key loses every run it opened.
UPDATE runs SET
	status = 'cancelled',
	error_code = 'key_revoked',
	error = coalesce(error, 'the API key it was opened with was revoked'),
	finished_at = :now
WHERE key_hash = (SELECT token_hash FROM agent_api_keys WHERE id = :id AND agent_id = :agent AND revoked_at IS NULL)
	AND status IN ('queued', 'running')
RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at

-- name: KeyRevoke
-- The key, revoked, and its agent's company; no row when agent :agent has
-- no such unrevoked key.
UPDATE agent_api_keys SET revoked_at = :now WHERE id = :id AND agent_id = :agent AND revoked_at IS NULL
RETURNING id, agent_id, prefix, created_at, last_used_at, revoked_at, name,
	(SELECT company_id FROM agents WHERE agents.id = agent_api_keys.agent_id)

-- name: KeyGet
SELECT id, agent_id, prefix, created_at, last_used_at, revoked_at, name FROM agent_api_keys WHERE id = :id AND agent_id = :agent

-- name: KeyList
SELECT id, agent_id, prefix, created_at, last_used_at, revoked_at, name FROM agent_api_keys
WHERE agent_id = :agent ORDER BY created_at, id

-- name: KeyAuth
-- The unrevoked key whose hash is :hash, whether its use is due to be
-- recorded (never recorded, or a minute ago or more: the caller then runs
-- KeyUsed), and its agent.
SELECT k.id, k.last_used_at IS NULL OR k.last_used_at <= :now - 60000000,
	a.id, a.company_id, a.name, a.name_key, a.role, a.status, a.created_at, a.last_heartbeat_at
FROM agent_api_keys k JOIN agents a ON a.id = k.agent_id
WHERE k.token_hash = :hash AND k.revoked_at IS NULL

-- name: KeyAuthRun
-- KeyAuth plus run :run when it is the key's agent's, live and renewed
-- less than :min_us microseconds ago: found, then the run's columns
-- (coalesced to zero values when there is no such run).
SELECT k.id, k.last_used_at IS NULL OR k.last_used_at <= :now - 60000000,
	a.id, a.company_id, a.name, a.name_key, a.role, a.status, a.created_at, a.last_heartbeat_at,
	r.id IS NOT NULL, coalesce(r.id, ''), coalesce(r.company_id, ''), coalesce(r.agent_id, ''), coalesce(r.status, ''),
	coalesce(r.invocation_source, ''), r.issue_id, r.retry_of_run_id, coalesce(r.attempt, 0), r.pid, r.host_id,
	r.lease_expires_at, r.last_sign_of_life_at, r.started_at, r.finished_at, r.exit_code, r.error_code, r.error,
	coalesce(r.created_at, 0)
FROM agent_api_keys k JOIN agents a ON a.id = k.agent_id
	LEFT JOIN runs r ON r.id = :run AND r.agent_id = a.id
		AND ({{run_live r}})
		AND :min_us > 0 AND r.last_sign_of_life_at > :now - :min_us
WHERE k.token_hash = :hash AND k.revoked_at IS NULL

-- name: KeyUsed
-- Records a key's use at most once a minute.
UPDATE agent_api_keys SET last_used_at = :now
WHERE id = :id AND (last_used_at IS NULL OR last_used_at <= :now - 60000000)
