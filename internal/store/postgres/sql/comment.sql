-- Comments of issues.

-- name: CommentInsert
-- Adds a comment to the issue @rid/@rident visible in @company ('' for any)
-- and writes its issue.commented {commentId}, recording the
-- Idempotency-Key if any (CTE rec); answers the comment and its company,
-- no row when there is no such issue.
WITH iss AS (
	SELECT i.id, i.company_id FROM issues i
	WHERE i.id = coalesce(nullif(@rid::text, ''), (SELECT ref.id FROM issues ref WHERE ref.identifier = @rident::text)) AND (@company::text = '' OR i.company_id IS NOT DISTINCT FROM @company::text)
), made AS (
	INSERT INTO comments (id, company_id, issue_id, body, author_agent_id, author_board, run_id, created_at)
	SELECT @id::text, iss.company_id, iss.id, @body::text, @author::text, @board::boolean, @actor_run::text, now() FROM iss
	RETURNING id, issue_id, body, author_agent_id, author_board, run_id, created_at, company_id
), rec AS (
	INSERT INTO idempotency_keys (actor_id, key, request_hash, resource_type, resource_id, created_at)
	SELECT @idem_actor::text, @idem_key::text, @idem_hash::text, @idem_type::text, made.id, now()
	FROM made WHERE @idem_key::text IS NOT NULL
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT made.company_id, @actor_type::text, @actor_id::text, @actor_run::text, @actor_request::text,
		'issue.commented', 'issue', made.issue_id, jsonb_build_object('commentId', made.id) FROM made
)
SELECT id, issue_id, body, author_agent_id, author_board, run_id, created_at, company_id FROM made

-- name: CommentGet
SELECT id, issue_id, body, author_agent_id, author_board, run_id, created_at FROM comments WHERE id = @id::text

-- name: IssueRef
-- The id of the issue @rid/@rident visible in @company ('' for any).
SELECT i.id FROM issues i
WHERE i.id = coalesce(nullif(@rid::text, ''), (SELECT ref.id FROM issues ref WHERE ref.identifier = @rident::text)) AND (@company::text = '' OR i.company_id IS NOT DISTINCT FROM @company::text)

-- name: CommentIssue
-- The id of the issue @rid/@rident visible in @company ('' for any).
SELECT i.id FROM issues i
WHERE i.id = coalesce(nullif(@rid::text, ''), (SELECT ref.id FROM issues ref WHERE ref.identifier = @rident::text)) AND (@company::text = '' OR i.company_id IS NOT DISTINCT FROM @company::text)

-- name: CommentSeq
-- The seq of comment @id of issue @issue; no row when it is not one.
SELECT seq FROM comments WHERE id = @id::text AND issue_id = @issue::text

-- name: CommentList
-- Oldest first: only comments after @after_seq, continuing after @cursor_seq.
SELECT id, issue_id, body, author_agent_id, author_board, run_id, created_at FROM comments
WHERE issue_id = @issue::text AND seq > @after_seq::bigint AND seq > @cursor_seq::bigint
ORDER BY seq LIMIT @limit::integer

-- name: CommentListDesc
-- Newest first: only comments after @after_seq, continuing below @cursor_seq.
SELECT id, issue_id, body, author_agent_id, author_board, run_id, created_at FROM comments
WHERE issue_id = @issue::text AND seq > @after_seq::bigint AND seq < @cursor_seq::bigint
ORDER BY seq DESC LIMIT @limit::integer

-- name: CommentOfIssue
-- The comment @id of issue @issue.
SELECT id, issue_id, body, author_agent_id, author_board, run_id, created_at FROM comments
WHERE id = @id::text AND issue_id = @issue::text
