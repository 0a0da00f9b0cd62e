package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/clasp-dev/clasp"
)

// IssueCreate creates an issue with the next identifier PREFIX-N of its
// company (gapless, never repeated: statement IssueInsert, after
// issueNumberer's statement where the write Querier has one), status
// backlog and priority medium by default, with its issue.created row
// {identifier, title, status, priority, assigneeAgentId}, then its parent
// and blockers (ApplyCreateDeps, D2-D5) in the same transaction (txWriter);
// it returns the issue as it then stands.
// With p.Idempotency, a repeat of an earlier creation creates nothing and
// answers that issue as it is now (IdempotencyParams; idempotent). Errors:
// 400 invalid_request (empty title, bad status or priority), 403 forbidden
// (an agent creating in another company), 404 not_found (company), 422
// precondition_failed (an agent creating it in_progress, in_progress
// without an assignee, an assignee that is no active agent of the
// company), 422 idempotency_key_reused, and those of ApplyCreateDeps.
func (c CRUD) IssueCreate(ctx context.Context, p *IssueCreateParams) (*clasp.Issue, error) {
	if err := p.Normalize(); err != nil {
		return nil, err
	}
	args := IdemArgs(ActorArgs(Args{"id": c.d.NewID(), "company": p.CompanyID, "title": p.Title,
		"description": p.Description, "status": string(p.Status), "priority": string(p.Priority),
		"priority_rank": p.Priority.Rank(), "assignee": nullable(p.AssigneeAgentID)}, p.Actor), p.Idempotency, IdemIssue)
	write := c.d.Write
	if tw, ok := c.d.(txWriter); ok && (p.ParentID != "" || len(p.BlockedByIssueIDs) > 0) {
		write = tw.WriteTx
	}
	return idempotent(ctx, c, write, p.Idempotency, IdemIssue, issueID, func(q Querier) (*clasp.Issue, error) {
		iss, err := c.issueInsert(ctx, q, p, args)
		if err != nil {
			return nil, err
		}
		return ApplyCreateDeps(ctx, q, c.d, iss, p)
	}, replayIssue(ctx))
}

// issueID is the id of iss, the resource an Idempotency-Key records.
func issueID(iss *clasp.Issue) string { return iss.ID }

// replayIssue answers the issue id an Idempotency-Key recorded, as it is
// now, read through q (statement IssueGet); the driver's error, wrapped.
func replayIssue(ctx context.Context) func(q Querier, id string) (*clasp.Issue, error) {
	return func(q Querier, id string) (*clasp.Issue, error) {
		iss, err := ScanIssue(q.QueryRow(ctx, "IssueGet", Args{"rid": id, "rident": "", "company": ""}))
		return iss, Wrap(err, "get issue %s", id)
	}
}

// issueNumberer is implemented by the write Querier of a dialect whose
// IssueInsert cannot take the company's next issue number itself (SQLite,
// whose statements write one table each): NextIssueNumber advances the
// counter of companyID (statement NextIdentifier) just before the insert,
// in the same transaction, and IssueInsert reads it. A write Querier
// without it (PostgreSQL) advances the counter in IssueInsert (a CTE).
type issueNumberer interface {
	NextIssueNumber(ctx context.Context, companyID string) error
}

// txWriter is implemented by a Driver whose Write runs each statement as
// its own transaction (PostgreSQL): WriteTx runs fn's statements in one
// transaction, run again whole on a deadlock or serialization failure,
// with fn's error translated as Write's. A Driver without it (SQLite) runs
// every Write as one transaction.
type txWriter interface {
	WriteTx(ctx context.Context, fn func(q Querier) error) error
}

// IssueList lists the issues of company p.CompanyID, newest first, one
// keyset page at a time, narrowed when set to p.Statuses (Driver.InList),
// to an assignee or the unassigned ones, to those whose title or
// identifier holds p.Query case-insensitively (Driver.LikeFold; %, _ and \
// in p.Query match themselves), to a parent's children and to the ready
// ones (D9). It answers the page and the cursor of the next one (""
// after the last).
func (c CRUD) IssueList(ctx context.Context, p *IssueListParams) ([]*clasp.Issue, string, error) {
	where, args := []string{"company_id = ?"}, []any{p.CompanyID}
	if len(p.Statuses) > 0 {
		st := make([]string, len(p.Statuses))
		for i, v := range p.Statuses {
			st[i] = string(v)
		}
		pred, a := c.d.InList("status", st)
		where, args = append(where, pred), append(args, a...)
	}
	switch {
	case p.Unassigned:
		where = append(where, "assignee_agent_id IS NULL")
	case p.AssigneeAgentID != "":
		where, args = append(where, "assignee_agent_id = ?"), append(args, p.AssigneeAgentID)
	}
	if p.Query != "" {
		like := "%" + strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(p.Query) + "%"
		title, targs := c.d.LikeFold("title", like)
		ident, iargs := c.d.LikeFold("identifier", like)
		where = append(where, "("+title+" OR "+ident+")")
		args = append(append(args, targs...), iargs...)
	}
	if p.ParentID != "" {
		where, args = append(where, "parent_id = ?"), append(args, p.ParentID) // D9: a parent's children
	}
	if p.Ready {
		where = append(where, "unresolved_blocker_count = 0") // D9
	}
	return ListPage(ctx, c.d, "issues", IssueCols, where, args, p.Page, false, ScanIssue,
		func(i *clasp.Issue) string { return EncodeCursor(i.CreatedAt, i.ID) })
}

// issueInsert inserts the issue of p (statement IssueInsert, args of
// IssueCreate; no row when the company is missing or the assignee is no
// active agent of it) through the write Querier q, with its issue.created
// row (activity). 404 not_found (company), 422 precondition_failed
// (assignee); other errors are the driver's, wrapped.
func (c CRUD) issueInsert(ctx context.Context, q Querier, p *IssueCreateParams, args Args) (*clasp.Issue, error) {
	if n, ok := q.(issueNumberer); ok {
		if err := n.NextIssueNumber(ctx, p.CompanyID); err != nil {
			return nil, fmt.Errorf("next identifier of company %s: %w", p.CompanyID, err)
		}
	}
	iss, err := ScanIssue(q.QueryRow(ctx, "IssueInsert", args))
	if c.d.NoRows(err) {
		_, err := ScanCompany(q.QueryRow(ctx, "CompanyGet", Args{"id": p.CompanyID}))
		if c.d.NoRows(err) {
			return nil, ErrNotFound("company", p.CompanyID)
		}
		if err != nil {
			return nil, fmt.Errorf("get company %s: %w", p.CompanyID, err)
		}
		return nil, clasp.Errorf(clasp.CodePreconditionFailed, "assigneeAgentId %q is not an active agent of the issue's company.",
			p.AssigneeAgentID).WithDetails("field", "assigneeAgentId")
	}
	if err != nil {
		return nil, fmt.Errorf("create issue in company %s: %w", p.CompanyID, err)
	}
	return iss, activity(ctx, q, iss.CompanyID, p.Actor, clasp.ActionIssueCreated, "issue", iss.ID, map[string]any{
		"identifier": iss.Identifier, "title": iss.Title, "status": iss.Status, "priority": iss.Priority,
		"assigneeAgentId": iss.AssigneeAgentID,
	})
}
