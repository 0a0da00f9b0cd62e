-- Comments of issues; seq orders an issue's comments.

-- name: IssueRef
-- The id of the issue :rid/:rident visible in :company ('' for any).
SELECT id FROM issues
WHERE (id = :rid OR identifier = :rident) AND (:company = '' OR company_id = :company)

-- name: CommentIssue
-- The id of the issue :rid/:rident visible in :company ('' for any).
SELECT id FROM issues
WHERE (id = :rid OR identifier = :rident) AND (:company = '' OR company_id = :company)

-- name: CommentInsert
-- Adds comment :id, last in its issue's order, to the issue :rid/:rident
-- visible in :company ('' for any), and answers it and its company; no
-- row when there is no such issue. Its issue.commented row and the
-- record of its Idempotency-Key are the writer's further statements.
INSERT INTO comments (id, company_id, issue_id, body, author_agent_id, author_board, run_id, seq, created_at)
SELECT :id, i.company_id, i.id, :body, :author, :board, :actor_run,
	(SELECT coalesce(max(c.seq), 0) + 1 FROM comments c WHERE c.issue_id = i.id), :now
FROM issues i
WHERE (i.id = :rid OR i.identifier = :rident) AND (:company = '' OR i.company_id = :company)
RETURNING id, issue_id, body, author_agent_id, author_board, run_id, created_at, company_id

-- name: CommentSeq
-- The seq of comment :id of issue :issue; no row when it is not one.
SELECT seq FROM comments WHERE id = :id AND issue_id = :issue

-- name: CommentList
-- Oldest first: only comments after :after_seq, continuing after :cursor_seq.
SELECT id, issue_id, body, author_agent_id, author_board, run_id, created_at FROM comments
WHERE issue_id = :issue AND seq > :after_seq AND seq > :cursor_seq ORDER BY seq LIMIT :limit

-- name: CommentListDesc
-- Newest first: only comments after :after_seq, continuing below :cursor_seq.
SELECT id, issue_id, body, author_agent_id, author_board, run_id, created_at FROM comments
WHERE issue_id = :issue AND seq > :after_seq AND seq < :cursor_seq ORDER BY seq DESC LIMIT :limit

-- name: CommentOfIssue
-- The comment :id of issue :issue.
SELECT id, issue_id, body, author_agent_id, author_board, run_id, created_at FROM comments WHERE id = :id AND issue_id = :issue

-- name: CommentGet
SELECT id, issue_id, body, author_agent_id, author_board, run_id, created_at FROM comments WHERE id = :id
