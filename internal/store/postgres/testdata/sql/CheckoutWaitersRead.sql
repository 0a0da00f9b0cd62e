-- $1 = @rid
-- $2 = @rident
-- $3 = @company
-- $4 = @runs
WITH i AS MATERIALIZED (
	SELECT i.id, i.company_id, i.status, i.assignee_agent_id, i.checkout_run_id, i.execution_run_id,
		CASE WHEN i.checkout_run_id IS NOT NULL THEN coalesce((SELECT CASE
			WHEN r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()) THEN 'live'
			WHEN r.status = 'running' THEN 'lost' ELSE 'terminal' END FROM runs r WHERE r.id = i.checkout_run_id), 'missing') END AS c_state,
		CASE WHEN i.execution_run_id IS NOT NULL THEN coalesce((SELECT CASE
			WHEN r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()) THEN 'live'
			WHEN r.status = 'running' THEN 'lost' ELSE 'terminal' END FROM runs r WHERE r.id = i.execution_run_id), 'missing') END AS e_state
	FROM issues i
	WHERE i.id = coalesce(nullif($1::text, ''), (SELECT ref.id FROM issues ref WHERE ref.identifier = $2::text)) AND ($3::text = '' OR i.company_id IS NOT DISTINCT FROM $3::text)
)
SELECT i.id, i.company_id, i.status, i.assignee_agent_id, i.checkout_run_id, i.execution_run_id, i.c_state, i.e_state,
	c.id, c.agent_id, c.company_id,
	CASE WHEN c.id IS NOT NULL THEN CASE
		WHEN c.status = 'queued' OR (c.status = 'running' AND c.lease_expires_at > now()) THEN 'live'
		WHEN c.status = 'running' THEN 'lost' ELSE 'terminal' END END
FROM i LEFT JOIN runs c ON c.id = ANY($4::text[])
