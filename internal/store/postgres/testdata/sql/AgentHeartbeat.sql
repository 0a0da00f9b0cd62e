-- $1 = @agent
UPDATE agents SET last_heartbeat_at = now() WHERE id = $1::text
