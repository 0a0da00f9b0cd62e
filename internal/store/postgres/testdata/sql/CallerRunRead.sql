-- $1 = @run
SELECT r.agent_id, r.company_id,
	CASE
		WHEN r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()) THEN 'live'
		WHEN r.status = 'running' THEN 'lost' ELSE 'terminal' END
FROM runs r WHERE r.id = $1::text
