INSERT INTO agents (id, company_id, name, name_key, role, status, created_at)
SELECT :id, c.id, :name, :name_key, :role, 'active', :now FROM companies c WHERE c.id = :company
RETURNING id, company_id, name, name_key, role, status, created_at, last_heartbeat_at
