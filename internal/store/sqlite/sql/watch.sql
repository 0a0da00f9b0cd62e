-- The activity stream.

-- name: ActivityAfter
-- Company :company's activity forward from id :after (index
-- activity_company). The single writer assigns ids in commit order: there
-- are no holes to wait for.
SELECT id, company_id, actor_type, actor_id, run_id, action, entity_type, entity_id, details, created_at, request_id
FROM activity
WHERE company_id = :company AND id > :after ORDER BY id LIMIT :limit

-- name: ActivityLatestID
SELECT coalesce(max(id), 0) FROM activity WHERE company_id = :company
