package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// CommentCreate adds a comment by the actor (an agent, in its run if any,
// or the board) to an issue of the actor's company, with its
// issue.commented row. With Idempotency, a repeat creates nothing and
// answers the recorded comment. 400 invalid_request for an empty body; 404
// not_found; 422 idempotency_key_reused.
func (s *Store) CommentCreate(ctx context.Context, p *store.CommentCreateParams) (*clasp.Comment, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	a := p.Actor
	rid, rident := store.SplitRef(p.Ref)
	var author *string
	if a.Type == clasp.ActorAgent {
		author = &a.AgentID
	}
	args := actorArgs(namedArgs{"id": s.newID(), "rid": rid, "rident": rident, "company": store.Scope(a), "body": p.Body,
		"author": author, "board": a.IsBoard()}, a)
	idemArgs(args, p.Idempotency, store.IdemComment)
	replay := func(id string) (*clasp.Comment, error) {
		c, err := store.ScanComment(s.pool.QueryRow(ctx, q("CommentGet"), namedArgs{"id": id}))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, notFound("comment", id)
		}
		return c, translate(wrap(err, "get comment %s", id))
	}
	return idempotent(ctx, s, p.Idempotency, store.IdemComment, replay, func() (*clasp.Comment, error) {
		var out *clasp.Comment
		err := s.retry(ctx, func() error {
			c, err := store.ScanComment(s.pool.QueryRow(ctx, q("CommentInsert"), args))
			if errors.Is(err, pgx.ErrNoRows) {
				return notFound("issue", p.Ref)
			}
			out = c
			return wrap(err, "comment on issue %s", p.Ref)
		})
		if err != nil {
			return nil, err
		}
		return out, nil
	})
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
	for _, f := range []struct{ name, id string }{{"after", p.After}, {"cursor", p.Cursor}} {
		if f.id == "" {
			continue
		}
		var ok bool
		if err := s.pool.QueryRow(ctx, q("CommentExists"), namedArgs{"id": f.id, "issue": issueID}).Scan(&ok); err != nil {
			return nil, translate(fmt.Errorf("find comment %s: %w", f.id, err))
		}
		if !ok {
			return nil, clasp.InvalidField(f.name, "%s %q is not a comment of this issue.", f.name, f.id)
		}
	}
	name := "CommentList"
	if p.Desc {
		name = "CommentListDesc"
	}
	rows, err := s.pool.Query(ctx, q(name), namedArgs{"issue": issueID, "after": p.After, "limit": store.PageLimit(p.Limit), "cursor": p.Cursor})
	if err != nil {
		return nil, translate(fmt.Errorf("list comments of issue %s: %w", issueID, err))
	}
	cs, err := store.ScanAll(rows, store.ScanComment)
	if err != nil {
		return nil, translate(fmt.Errorf("list comments of issue %s: %w", issueID, err))
	}
	return cs, nil
}

// commentIssue returns the id of the issue ref visible in companyID ("" for
// any); 404 not_found.
func (s *Store) commentIssue(ctx context.Context, companyID, ref string) (string, error) {
	rid, rident := store.SplitRef(ref)
	var issueID string
	err := s.pool.QueryRow(ctx, q("IssueRef"), namedArgs{"rid": rid, "rident": rident, "company": companyID}).Scan(&issueID)
	if errors.Is(err, pgx.ErrNoRows) {
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
	c, err := store.ScanComment(s.pool.QueryRow(ctx, q("CommentOfIssue"), namedArgs{"id": commentID, "issue": issueID}))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound("comment", commentID)
	}
	if err != nil {
		return nil, translate(fmt.Errorf("get comment %s: %w", commentID, err))
	}
	return c, nil
}
