-- The activity stream.

-- name: ActivityAfter
-- Activity forward from @after across all companies (holes in the ids are
-- global), with what the reader needs to judge a hole: whether the row is
-- older than @settle seconds (settled) and whether any transaction with an
-- xid is in progress (quiet).
SELECT id, company_id, actor_type, actor_id, run_id, action, entity_type, entity_id, details, created_at, request_id,
	now() - created_at > make_interval(secs => @settle::double precision) AS settled,
	cardinality(ARRAY(SELECT pg_snapshot_xip(pg_current_snapshot()))) = 0 AS quiet
FROM activity WHERE id > @after::bigint ORDER BY id LIMIT @limit::integer

-- name: ActivityLatestID
SELECT coalesce(max(id), 0) FROM activity WHERE company_id = @company::text
