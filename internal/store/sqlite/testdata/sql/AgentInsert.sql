INSERT INTO agents (id, company_id, name, name_key, role, status, created_at)
	SELECT ?, c.id, ?, ?, ?, 'active', ? FROM companies c WHERE c.id = ?
	RETURNING id, company_id, name, name_key, role, status, created_at, last_heartbeat_at
