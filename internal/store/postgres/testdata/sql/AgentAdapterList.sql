SELECT id, company_id, name, name_key, role, status, created_at, last_heartbeat_at, adapter_config
FROM agents WHERE adapter_config IS NOT NULL AND status <> 'terminated' ORDER BY created_at, id
