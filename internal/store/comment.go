package store

import (
	"context"
	"fmt"
	"math"

	"github.com/clasp-dev/clasp"
)

// CommentCreate adds a comment by the actor (an agent, in its run if any,
// or the board) to an issue of the actor's company, with its
// issue.commented row, as one write. With p.Idempotency, a repeat of an
// earlier creation adds nothing and answers that comment
// (IdempotencyParams; idempotent). 400 invalid_request for an empty body;
// 404 not_found; 422 idempotency_key_reused.
func (c CRUD) CommentCreate(ctx context.Context, p *CommentCreateParams) (*clasp.Comment, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	rid, rident := SplitRef(p.Ref)
	args := IdemArgs(CommentArgs(c.d.NewID(), rid, rident, Scope(p.Actor), p.Body, p.Actor), p.Idempotency, IdemComment)
	return idempotent(ctx, c, c.d.Write, p.Idempotency, IdemComment, func(cm *clasp.Comment) string { return cm.ID },
		func(q Querier) (*clasp.Comment, error) {
			cm, err := CommentInsert(ctx, q, args, p.Actor)
			if c.d.NoRows(err) {
				return nil, ErrNotFound("issue", p.Ref)
			}
			return cm, Wrap(err, "comment on issue %s", p.Ref)
		},
		func(q Querier, id string) (*clasp.Comment, error) {
			cm, err := ScanComment(q.QueryRow(ctx, "CommentGet", Args{"id": id}))
			if c.d.NoRows(err) {
				return nil, ErrNotFound("comment", id)
			}
			return cm, Wrap(err, "get comment %s", id)
		})
}

// CommentArgs returns the arguments of statement CommentInsert: comment
// id with body, by actor a (its author: the agent, or the board; its run:
// the actor's, if any; ActorArgs), on the issue rid/rident (SplitRef)
// visible in company ("" for any). A PostgreSQL statement also needs
// IdemArgs.
func CommentArgs(id, rid, rident, company, body string, a Actor) Args {
	var author any
	if a.Type == clasp.ActorAgent {
		author = a.AgentID
	}
	return ActorArgs(Args{"id": id, "rid": rid, "rident": rident, "company": company, "body": body,
		"author": author, "board": a.IsBoard()}, a)
}

// CommentInsert adds a comment through the write Querier q (statement
// CommentInsert, args from CommentArgs; it answers the comment and its
// company) and its issue.commented row {commentId} (activity). It returns
// the comment, or the driver's untranslated error: its no-rows error when
// there is no such issue.
func CommentInsert(ctx context.Context, q Querier, args Args, a Actor) (*clasp.Comment, error) {
	var (
		cm        clasp.Comment
		companyID string
	)
	err := q.QueryRow(ctx, "CommentInsert", args).Scan(&cm.ID, &cm.IssueID, &cm.Body, &cm.AuthorAgentID, &cm.AuthorBoard,
		&cm.RunID, Time(&cm.CreatedAt), &companyID)
	if err != nil {
		return nil, err
	}
	err = activity(ctx, q, companyID, a, clasp.ActionIssueCommented, "issue", cm.IssueID, map[string]any{"commentId": cm.ID})
	if err != nil {
		return nil, err
	}
	return &cm, nil
}

// CommentList lists the comments of an issue (scoped to CompanyID when
// set), oldest first or, with Desc, newest first; only those written after
// the comment After (exclusive) when set, and continuing after the comment
// Cursor in the list's order when set; at most Limit (1..1000, default
// 100). 404 not_found for the issue; 400 invalid_request if After or Cursor
// is no comment of it.
func (c CRUD) CommentList(ctx context.Context, p *CommentListParams) ([]*clasp.Comment, error) {
	issueID, err := c.commentIssue(ctx, p.CompanyID, p.Ref)
	if err != nil {
		return nil, err
	}
	seqOf := func(field, id string, none int64) (int64, error) {
		if id == "" {
			return none, nil
		}
		var seq int64
		err := c.d.Read().QueryRow(ctx, "CommentSeq", Args{"id": id, "issue": issueID}).Scan(&seq)
		if c.d.NoRows(err) {
			return 0, clasp.InvalidField(field, "%s %q is not a comment of this issue.", field, id)
		}
		if err != nil {
			return 0, c.d.Translate(fmt.Errorf("find comment %s: %w", id, err))
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
	cs, err := queryAll(ctx, c.d.Read(), name, Args{"issue": issueID, "after_seq": afterSeq, "cursor_seq": cursorSeq,
		"limit": PageLimit(p.Limit)}, ScanComment)
	if err != nil {
		return nil, c.d.Translate(fmt.Errorf("list comments of issue %s: %w", issueID, err))
	}
	return cs, nil
}

// commentIssue returns the id of the issue ref visible in companyID ("" for
// any); 404 not_found.
func (c CRUD) commentIssue(ctx context.Context, companyID, ref string) (string, error) {
	rid, rident := SplitRef(ref)
	var issueID string
	err := c.d.Read().QueryRow(ctx, "CommentIssue", Args{"rid": rid, "rident": rident, "company": companyID}).Scan(&issueID)
	if c.d.NoRows(err) {
		return "", ErrNotFound("issue", ref)
	}
	if err != nil {
		return "", c.d.Translate(fmt.Errorf("find issue %s: %w", ref, err))
	}
	return issueID, nil
}

// CommentGet returns the comment commentID of the issue ref (scoped to
// companyID when set). 404 not_found for the issue, or for a comment that
// is not of it.
func (c CRUD) CommentGet(ctx context.Context, companyID, ref, commentID string) (*clasp.Comment, error) {
	issueID, err := c.commentIssue(ctx, companyID, ref)
	if err != nil {
		return nil, err
	}
	cm, err := ScanComment(c.d.Read().QueryRow(ctx, "CommentOfIssue", Args{"id": commentID, "issue": issueID}))
	if c.d.NoRows(err) {
		return nil, ErrNotFound("comment", commentID)
	}
	if err != nil {
		return nil, c.d.Translate(fmt.Errorf("get comment %s: %w", commentID, err))
	}
	return cm, nil
}
