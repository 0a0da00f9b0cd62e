UPDATE agents SET adapter_config = :config WHERE id = :agent AND status <> 'terminated'
RETURNING company_id
