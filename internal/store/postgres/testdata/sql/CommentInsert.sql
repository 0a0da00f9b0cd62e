-- $1 = @rid
-- $2 = @rident
-- $3 = @company
-- $4 = @id
-- $5 = @body
-- $6 = @author
-- $7 = @board
-- $8 = @actor_run
-- $9 = @idem_actor
-- $10 = @idem_key
-- $11 = @idem_hash
-- $12 = @idem_type
-- $13 = @actor_type
-- $14 = @actor_id
-- $15 = @actor_request
WITH iss AS (
	SELECT i.id, i.company_id FROM issues i
	WHERE i.id = coalesce(nullif($1::text, ''), (SELECT ref.id FROM issues ref WHERE ref.identifier = $2::text)) AND ($3::text = '' OR i.company_id IS NOT DISTINCT FROM $3::text)
), made AS (
	INSERT INTO comments (id, company_id, issue_id, body, author_agent_id, author_board, run_id, created_at)
	SELECT $4::text, iss.company_id, iss.id, $5::text, $6::text, $7::boolean, $8::text, now() FROM iss
	RETURNING id, issue_id, body, author_agent_id, author_board, run_id, created_at, company_id
), rec AS (
	INSERT INTO idempotency_keys (actor_id, key, request_hash, resource_type, resource_id, created_at)
	SELECT $9::text, $10::text, $11::text, $12::text, made.id, now()
	FROM made WHERE $10::text IS NOT NULL
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT made.company_id, $13::text, $14::text, $8::text, $15::text,
		'issue.commented', 'issue', made.issue_id, jsonb_build_object('commentId', made.id) FROM made
)
SELECT id, issue_id, body, author_agent_id, author_board, run_id, created_at, company_id FROM made
