-- $1 = @settle
-- $2 = @after
-- $3 = @limit
SELECT id, company_id, actor_type, actor_id, run_id, action, entity_type, entity_id, details, created_at, request_id,
	now() - created_at > make_interval(secs => $1::double precision) AS settled,
	cardinality(ARRAY(SELECT pg_snapshot_xip(pg_current_snapshot()))) = 0 AS quiet
FROM activity WHERE id > $2::bigint ORDER BY id LIMIT $3::integer
