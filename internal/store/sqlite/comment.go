package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

const (
	// sqlIssueRef resolves an issue reference visible in :company ("" for any).
	sqlIssueRef = `SELECT id, company_id FROM issues
	WHERE (id = :rid OR identifier = :rident) AND (:company = '' OR company_id = :company)`
	sqlCommentInsert = `INSERT INTO comments (id, company_id, issue_id, body, author_agent_id, author_board, run_id, seq, created_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, (SELECT coalesce(max(seq), 0) + 1 FROM comments WHERE issue_id = ?), ?)
	RETURNING ` + commentCols
	sqlCommentList = `SELECT ` + commentCols + ` FROM comments
	WHERE issue_id = :issue AND seq > :after_seq ORDER BY seq LIMIT :limit`
	sqlCommentSeq  = `SELECT seq FROM comments WHERE id = ? AND issue_id = ?`
	sqlCommentByID = `SELECT ` + commentCols + ` FROM comments WHERE id = ?`
)

// CommentCreate adds a comment by the actor (an agent, in its run if any,
// or the board) to an issue of the actor's company. With p.Idempotency, a
// repeat of an earlier creation adds nothing and returns that comment
// (store.IdempotencyParams). 400 invalid_request for an empty body; 404
// not_found; 422 idempotency_key_reused.
func (s *Store) CommentCreate(ctx context.Context, p *store.CommentCreateParams) (*clasp.Comment, error) {
	if strings.TrimSpace(p.Body) == "" {
		return nil, clasp.InvalidField("body", "body is required.")
	}
	var out *clasp.Comment
	err := s.write(ctx, func(tx *wtx) error {
		if id, err := tx.idempotencyLookup(ctx, p.Idempotency, idemComment); err != nil || id != "" {
			if err != nil {
				return err
			}
			out, err = scanComment(tx.queryRow(ctx, qCommentByID, id))
			if err != nil {
				return fmt.Errorf("get comment %s: %w", id, err)
			}
			p.Idempotency.Replayed = true
			return nil
		}
		rid, rident := splitRef(p.Ref)
		var issueID, companyID string
		err := tx.queryRow(ctx, qIssueRef, sql.Named("rid", rid), sql.Named("rident", rident),
			sql.Named("company", scope(p.Actor))).Scan(&issueID, &companyID)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("issue", p.Ref)
		}
		if err != nil {
			return fmt.Errorf("find issue %s: %w", p.Ref, err)
		}
		out, err = tx.commentInsert(ctx, issueID, companyID, p.Body, p.Actor)
		if err != nil {
			return err
		}
		return tx.idempotencyRecord(ctx, p.Idempotency, idemComment, out.ID)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// commentInsert writes a comment on an issue and its issue.commented row.
func (t *wtx) commentInsert(ctx context.Context, issueID, companyID, body string, a store.Actor) (*clasp.Comment, error) {
	var author any
	if a.Type == clasp.ActorAgent {
		author = a.AgentID
	}
	c, err := scanComment(t.queryRow(ctx, qCommentInsert, t.s.newID(), companyID, issueID, body, author, a.IsBoard(),
		nullable(a.RunID), issueID, t.now))
	if err != nil {
		return nil, fmt.Errorf("comment on issue %s: %w", issueID, err)
	}
	err = t.logActivity(ctx, companyID, a, clasp.ActionIssueCommented, "issue", issueID, map[string]any{"commentId": c.ID})
	return c, err
}

// CommentList lists the comments of an issue (scoped to CompanyID when
// set), oldest first, after the comment After (exclusive) when set, at most
// Limit (1..1000, default 100). 404 not_found for the issue; 400
// invalid_request if After is no comment of it.
func (s *Store) CommentList(ctx context.Context, p *store.CommentListParams) ([]*clasp.Comment, error) {
	rid, rident := splitRef(p.Ref)
	var issueID, companyID string
	err := s.readRow(ctx, qIssueRef, sql.Named("rid", rid), sql.Named("rident", rident), sql.Named("company", p.CompanyID)).
		Scan(&issueID, &companyID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("issue", p.Ref)
	}
	if err != nil {
		return nil, translate(fmt.Errorf("find issue %s: %w", p.Ref, err))
	}
	var afterSeq int64
	if p.After != "" {
		err := s.readRow(ctx, qCommentSeq, p.After, issueID).Scan(&afterSeq)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, clasp.InvalidField("after", "after %q is not a comment of this issue.", p.After)
		}
		if err != nil {
			return nil, translate(fmt.Errorf("find comment %s: %w", p.After, err))
		}
	}
	rows, err := s.read(ctx, qCommentList, sql.Named("issue", issueID), sql.Named("after_seq", afterSeq),
		sql.Named("limit", pageLimit(p.Limit)))
	if err != nil {
		return nil, translate(fmt.Errorf("list comments of issue %s: %w", issueID, err))
	}
	cs, err := scanAll(rows, scanComment)
	if err != nil {
		return nil, translate(fmt.Errorf("list comments of issue %s: %w", issueID, err))
	}
	return cs, nil
}
