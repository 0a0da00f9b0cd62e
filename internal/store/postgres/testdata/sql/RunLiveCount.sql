-- $1 = @agent
SELECT count(*) FROM runs WHERE agent_id = $1::text
	AND (status = 'queued' OR (status = 'running' AND lease_expires_at > now()))
