SELECT id, company_id, actor_type, actor_id, run_id, action, entity_type, entity_id, details, created_at, request_id
FROM activity
WHERE company_id = :company AND id > :after ORDER BY id LIMIT :limit
