UPDATE agents SET
	status = coalesce(:status, status),
	name = coalesce(:name, name),
	name_key = coalesce(:name_key, name_key),
	role = coalesce(:role, role)
WHERE id = :id
	AND (status <> 'terminated' OR coalesce(:status, 'terminated') = 'terminated')
RETURNING id, company_id, name, name_key, role, status, created_at, last_heartbeat_at
