UPDATE agents SET last_heartbeat_at = :now WHERE id = :agent
