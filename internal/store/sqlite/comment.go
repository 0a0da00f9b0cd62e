package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// CommentCreate adds a comment by the actor (an agent, in its run if any,
// or the board) to an issue of the actor's company. With p.Idempotency, a
// repeat of an earlier creation adds nothing and returns that comment
// (store.IdempotencyParams). 400 invalid_request for an empty body; 404
// not_found; 422 idempotency_key_reused.
func (s *Store) CommentCreate(ctx context.Context, p *store.CommentCreateParams) (*clasp.Comment, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var out *clasp.Comment
	err := s.write(ctx, func(tx *wtx) error {
		if id, err := tx.idempotencyLookup(ctx, p.Idempotency, store.IdemComment); err != nil || id != "" {
			if err != nil {
				return err
			}
			out, err = store.ScanComment(tx.queryRow(ctx, "CommentGet", sql.Named("id", id)))
			if err != nil {
				return fmt.Errorf("get comment %s: %w", id, err)
			}
			p.Idempotency.Replayed = true
			return nil
		}
		rid, rident := store.SplitRef(p.Ref)
		var issueID, companyID string
		err := tx.queryRow(ctx, "IssueRef", sql.Named("rid", rid), sql.Named("rident", rident),
			sql.Named("company", store.Scope(p.Actor))).Scan(&issueID, &companyID)
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
		return tx.idempotencyRecord(ctx, p.Idempotency, store.IdemComment, out.ID)
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
	c, err := store.ScanComment(t.queryRow(ctx, "CommentInsert", sql.Named("id", t.s.newID()), sql.Named("company", companyID),
		sql.Named("issue", issueID), sql.Named("body", body), sql.Named("author", author), sql.Named("board", a.IsBoard()),
		sql.Named("run", nullable(a.RunID)), sql.Named("now", t.now)))
	if err != nil {
		return nil, fmt.Errorf("comment on issue %s: %w", issueID, err)
	}
	err = t.logActivity(ctx, companyID, a, clasp.ActionIssueCommented, "issue", issueID, map[string]any{"commentId": c.ID})
	return c, err
}

// CommentList lists the comments of an issue (scoped to CompanyID when
// set), oldest first or, with Desc, newest first; only those written after
// the comment After (exclusive) when set, and continuing after the comment
// Cursor in the list's order when set; at most Limit (1..1000, default
// 100). 404 not_found for the issue; 400 invalid_request if After or Cursor
// is no comment of it.
func (s *Store) CommentList(ctx context.Context, p *store.CommentListParams) ([]*clasp.Comment, error) {
	issueID, err := s.commentIssue(ctx, p.CompanyID, p.Ref)
	if err != nil {
		return nil, err
	}
	seqOf := func(field, id string, none int64) (int64, error) {
		if id == "" {
			return none, nil
		}
		var seq int64
		err := s.readRow(ctx, "CommentSeq", sql.Named("id", id), sql.Named("issue", issueID)).Scan(&seq)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, clasp.InvalidField(field, "%s %q is not a comment of this issue.", field, id)
		}
		if err != nil {
			return 0, translate(fmt.Errorf("find comment %s: %w", id, err))
		}
		return seq, nil
	}
	afterSeq, err := seqOf("after", p.After, 0)
	if err != nil {
		return nil, err
	}
	name, none := "CommentList", int64(0)
	if p.Desc {
		name, none = "CommentListDesc", math.MaxInt64
	}
	cursorSeq, err := seqOf("cursor", p.Cursor, none)
	if err != nil {
		return nil, err
	}
	rows, err := s.read(ctx, name, sql.Named("issue", issueID), sql.Named("after_seq", afterSeq),
		sql.Named("cursor_seq", cursorSeq), sql.Named("limit", store.PageLimit(p.Limit)))
	if err != nil {
		return nil, translate(fmt.Errorf("list comments of issue %s: %w", issueID, err))
	}
	cs, err := scanAll(rows, store.ScanComment)
	if err != nil {
		return nil, translate(fmt.Errorf("list comments of issue %s: %w", issueID, err))
	}
	return cs, nil
}

// commentIssue returns the id of the issue ref visible in companyID ("" for
// any); 404 not_found.
func (s *Store) commentIssue(ctx context.Context, companyID, ref string) (string, error) {
	rid, rident := store.SplitRef(ref)
	var issueID, cid string
	err := s.readRow(ctx, "IssueRef", sql.Named("rid", rid), sql.Named("rident", rident), sql.Named("company", companyID)).
		Scan(&issueID, &cid)
	if errors.Is(err, sql.ErrNoRows) {
		return "", notFound("issue", ref)
	}
	if err != nil {
		return "", translate(fmt.Errorf("find issue %s: %w", ref, err))
	}
	return issueID, nil
}

// CommentGet returns the comment commentID of the issue ref (scoped to
// companyID when set). 404 not_found for the issue, or for a comment that
// is not of it.
func (s *Store) CommentGet(ctx context.Context, companyID, ref, commentID string) (*clasp.Comment, error) {
	issueID, err := s.commentIssue(ctx, companyID, ref)
	if err != nil {
		return nil, err
	}
	c, err := store.ScanComment(s.readRow(ctx, "CommentOfIssue", sql.Named("id", commentID), sql.Named("issue", issueID)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("comment", commentID)
	}
	if err != nil {
		return nil, translate(fmt.Errorf("get comment %s: %w", commentID, err))
	}
	return c, nil
}
