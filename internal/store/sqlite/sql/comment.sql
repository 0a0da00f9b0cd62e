-- Comments of issues; seq orders an issue's comments.

-- name: IssueRef
-- The id and company of the issue :rid/:rident visible in :company ('' for any).
SELECT id, company_id FROM issues
WHERE (id = :rid OR identifier = :rident) AND (:company = '' OR company_id = :company)

-- name: CommentInsert
INSERT INTO comments (id, company_id, issue_id, body, author_agent_id, author_board, run_id, seq, created_at)
VALUES (:id, :company, :issue, :body, :author, :board, :run,
	(SELECT coalesce(max(seq), 0) + 1 FROM comments WHERE issue_id = :issue), :now)
RETURNING id, issue_id, body, author_agent_id, author_board, run_id, created_at

-- name: CommentList
-- Oldest first: only comments after :after_seq, continuing after :cursor_seq.
SELECT id, issue_id, body, author_agent_id, author_board, run_id, created_at FROM comments
WHERE issue_id = :issue AND seq > :after_seq AND seq > :cursor_seq ORDER BY seq LIMIT :limit

-- name: CommentListDesc
-- Newest first: :cursor_seq bounds from above.
SELECT id, issue_id, body, author_agent_id, author_board, run_id, created_at FROM comments
WHERE issue_id = :issue AND seq > :after_seq AND seq < :cursor_seq ORDER BY seq DESC LIMIT :limit

-- name: CommentOfIssue
-- The comment :id of issue :issue.
SELECT id, issue_id, body, author_agent_id, author_board, run_id, created_at FROM comments WHERE id = :id AND issue_id = :issue

-- name: CommentSeq
-- The seq of comment :id of issue :issue.
SELECT seq FROM comments WHERE id = :id AND issue_id = :issue

-- name: CommentGet
SELECT id, issue_id, body, author_agent_id, author_board, run_id, created_at FROM comments WHERE id = :id
