-- Claim-next (L1): check out the most urgent issue the calling run may
-- take. The pick reads, for each status a claim may take, the first
-- eligible issue of one ordered index range (the company's unassigned
-- issues, issues_claim_unassigned; the agent's own, issues_assignee_status)
-- and keeps the most urgent of those few: (priority_rank, created_at, id).
-- Its cost does not grow with the number of issues.

-- name: ClaimPick
-- The id of the most urgent issue of company :company that agent :agent's
-- run :run may claim: unassigned with a status in the JSON array
-- :unassigned, or assigned to :agent with a status in :mine (the expected
-- statuses plus in_progress, L1's inbox adoption case); an empty array
-- leaves a branch out (scope). None unless :run is live and :agent's, in
-- the issue's company (L1, as Claim).
SELECT c.id FROM issues c WHERE c.id IN (
	SELECT (SELECT i.id FROM issues i INDEXED BY issues_claim_unassigned
		-- L1: unassigned, in the company, with a status the claim takes
		WHERE i.company_id = :company AND i.assignee_agent_id IS NULL AND i.status = s.value
			-- D7: every blocker done (the partial index holds no other issue)
			AND i.unresolved_blocker_count = 0
			AND i.escalated_at IS NULL -- E3: no agent takes an escalated issue
			-- L1/L3: each lock column is empty, the caller's run, or names a dead run
			AND (i.checkout_run_id IS NULL OR i.checkout_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r
				WHERE r.id = i.checkout_run_id AND ({{run_live r}})))
			AND (i.execution_run_id IS NULL OR i.execution_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r
				WHERE r.id = i.execution_run_id AND ({{run_live r}})))
			-- L2: a claim never answers what the run holds
			AND NOT (i.checkout_run_id IS :run AND i.execution_run_id IS :run)
		ORDER BY i.priority_rank, i.created_at, i.id LIMIT 1)
	FROM json_each(:unassigned) s
	UNION ALL
	SELECT (SELECT i.id FROM issues i INDEXED BY issues_assignee_status
		-- L1: the agent's, in the company, with a status the claim takes
		WHERE i.assignee_agent_id = :agent AND i.status = s.value AND i.company_id = :company
			-- D7: every blocker done, unless it is in_progress and the agent's already (adoption)
			AND (i.unresolved_blocker_count = 0 OR i.status = 'in_progress')
			AND i.escalated_at IS NULL -- E3: no agent takes an escalated issue
			-- L1/L3: each lock column is empty, the caller's run, or names a dead run
			AND (i.checkout_run_id IS NULL OR i.checkout_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r
				WHERE r.id = i.checkout_run_id AND ({{run_live r}})))
			AND (i.execution_run_id IS NULL OR i.execution_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r
				WHERE r.id = i.execution_run_id AND ({{run_live r}})))
			-- L2: a claim never answers what the run holds
			AND NOT (i.checkout_run_id IS :run AND i.execution_run_id IS :run)
		ORDER BY i.priority_rank, i.created_at, i.id LIMIT 1)
	FROM json_each(:mine) s)
	AND EXISTS (SELECT 1 FROM runs r WHERE r.id = :run AND r.agent_id = :agent AND r.company_id = c.company_id
		AND ({{run_live r}}))
ORDER BY c.priority_rank, c.created_at, c.id LIMIT 1

-- name: Claim
-- L1 checkout of the pick (ClaimPick's statement, inline) by run :run of
-- agent :agent, when the pick is unlocked and :run is live and :agent's
-- (in the issue's company). It sets what Checkout sets; the epoch always
-- goes up (the pick excludes what :run holds). A dead holder's pick
-- matches nothing: the store then checks it out with Checkout (L3).
UPDATE issues SET
	status = 'in_progress',
	assignee_agent_id = :agent,
	checkout_run_id = :run,
	execution_run_id = :run,
	execution_agent_name_key = (SELECT a.name_key FROM agents a WHERE a.id = :agent),
	execution_locked_at = :now,
	started_at = coalesce(started_at, :now),
	checkout_epoch = checkout_epoch + 1,
	updated_at = :now
WHERE id = (SELECT c.id FROM issues c WHERE c.id IN (
		SELECT (SELECT i.id FROM issues i INDEXED BY issues_claim_unassigned
			WHERE i.company_id = :company AND i.assignee_agent_id IS NULL AND i.status = s.value
				AND i.unresolved_blocker_count = 0 -- D7
				AND i.escalated_at IS NULL -- E3: no agent takes an escalated issue
				AND (i.checkout_run_id IS NULL OR i.checkout_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r
					WHERE r.id = i.checkout_run_id AND ({{run_live r}})))
				AND (i.execution_run_id IS NULL OR i.execution_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r
					WHERE r.id = i.execution_run_id AND ({{run_live r}})))
				AND NOT (i.checkout_run_id IS :run AND i.execution_run_id IS :run)
			ORDER BY i.priority_rank, i.created_at, i.id LIMIT 1)
		FROM json_each(:unassigned) s
		UNION ALL
		SELECT (SELECT i.id FROM issues i INDEXED BY issues_assignee_status
			WHERE i.assignee_agent_id = :agent AND i.status = s.value AND i.company_id = :company
				AND (i.unresolved_blocker_count = 0 OR i.status = 'in_progress') -- D7
				AND i.escalated_at IS NULL -- E3: no agent takes an escalated issue
				AND (i.checkout_run_id IS NULL OR i.checkout_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r
					WHERE r.id = i.checkout_run_id AND ({{run_live r}})))
				AND (i.execution_run_id IS NULL OR i.execution_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r
					WHERE r.id = i.execution_run_id AND ({{run_live r}})))
				AND NOT (i.checkout_run_id IS :run AND i.execution_run_id IS :run)
			ORDER BY i.priority_rank, i.created_at, i.id LIMIT 1)
		FROM json_each(:mine) s)
	ORDER BY c.priority_rank, c.created_at, c.id LIMIT 1)
	-- fast path: only an unlocked issue, whose old lock columns need no read
	AND checkout_run_id IS NULL AND execution_run_id IS NULL
	-- L1: the caller's run is live and the agent's, in the issue's company
	AND EXISTS (SELECT 1 FROM runs r WHERE r.id = :run AND r.agent_id = :agent AND r.company_id = issues.company_id
		AND ({{run_live r}}))
RETURNING id, company_id, identifier, title, description, status, priority, assignee_agent_id,
	checkout_run_id, checkout_epoch, execution_run_id, execution_agent_name_key, execution_locked_at,
	started_at, completed_at, cancelled_at, created_at, updated_at, parent_id, unresolved_blocker_count, completed_epoch, relation_count
