UPDATE agents SET last_heartbeat_at = ? WHERE id = ?
