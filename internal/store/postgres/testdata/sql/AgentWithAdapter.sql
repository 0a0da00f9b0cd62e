-- $1 = @agent
SELECT id, company_id, name, name_key, role, status, created_at, last_heartbeat_at, adapter_config
FROM agents WHERE id = $1::text
