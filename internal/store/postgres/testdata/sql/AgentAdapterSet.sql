-- $1 = @config
-- $2 = @agent
UPDATE agents SET adapter_config = $1::text WHERE id = $2::text AND status <> 'terminated'
RETURNING company_id
