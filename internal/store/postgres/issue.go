package postgres

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// IssueCreate creates an issue with the next identifier PREFIX-N of its
// company. Status defaults to backlog, priority to medium. With
// Idempotency, a repeat creates nothing and answers the recorded issue as
// it is now (store.IdempotencyParams). Errors: 400
// invalid_request (empty title, bad status or priority), 403 forbidden (an
// agent creating in another company), 404 not_found (company), 422
// precondition_failed (an agent creating it in_progress, in_progress
// without an assignee, an assignee that is no active agent of the
// company), 422 idempotency_key_reused, and those of store.ApplyCreateDeps
// for its parent and blockers (D2-D5).
func (s *Store) IssueCreate(ctx context.Context, p *store.IssueCreateParams) (*clasp.Issue, error) {
	if err := p.Normalize(); err != nil {
		return nil, err
	}
	title, status, priority, a := p.Title, p.Status, p.Priority, p.Actor
	args := actorArgs(namedArgs{"id": s.newID(), "company": p.CompanyID, "title": title, "description": p.Description,
		"status": string(status), "priority": string(priority), "priority_rank": priority.Rank(),
		"assignee": nullable(p.AssigneeAgentID)}, a)
	idemArgs(args, p.Idempotency, store.IdemIssue)
	replay := func(id string) (*clasp.Issue, error) { return s.IssueGet(ctx, "", id) }
	return idempotent(ctx, s, p.Idempotency, store.IdemIssue, replay, func() (*clasp.Issue, error) {
		if len(p.BlockedByIssueIDs) > 0 || p.ParentID != "" {
			return s.issueCreateDeps(ctx, p, args)
		}
		var out *clasp.Issue
		err := s.retry(ctx, func() error {
			iss, err := store.ScanIssue(s.pool.QueryRow(ctx, q("IssueInsert"), args))
			if errors.Is(err, pgx.ErrNoRows) {
				if _, err := s.CompanyGet(ctx, p.CompanyID); err != nil {
					return err
				}
				return clasp.Errorf(clasp.CodePreconditionFailed, "assigneeAgentId %q is not an active agent of the issue's company.",
					p.AssigneeAgentID).WithDetails("field", "assigneeAgentId")
			}
			out = iss
			return wrap(err, "create issue in company %s", p.CompanyID)
		})
		if err != nil {
			return nil, err
		}
		return out, nil
	})
}

// issueCreateDeps is IssueCreate of an issue with a parent or blockers:
// statement IssueInsert (args) and the edges (store.ApplyCreateDeps, D2-D5)
// in one transaction, run again on a deadlock.
func (s *Store) issueCreateDeps(ctx context.Context, p *store.IssueCreateParams, args namedArgs) (*clasp.Issue, error) {
	var out *clasp.Issue
	err := s.tx(ctx, func(tx pgx.Tx) error {
		iss, err := store.ScanIssue(tx.QueryRow(ctx, q("IssueInsert"), args))
		if errors.Is(err, pgx.ErrNoRows) {
			if _, err := s.CompanyGet(ctx, p.CompanyID); err != nil {
				return err
			}
			return clasp.Errorf(clasp.CodePreconditionFailed, "assigneeAgentId %q is not an active agent of the issue's company.",
				p.AssigneeAgentID).WithDetails("field", "assigneeAgentId")
		}
		if err != nil {
			return wrap(err, "create issue in company %s", p.CompanyID)
		}
		out, err = store.ApplyCreateDeps(ctx, pooled{tx}, driver{s}, iss, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// IssueList lists issues of a company, newest first, narrowed to statuses,
// an assignee (or unassigned ones) and a case-insensitive substring of the
// title or identifier when set.
func (s *Store) IssueList(ctx context.Context, p *store.IssueListParams) ([]*clasp.Issue, string, error) {
	where, args := []string{"company_id = ?"}, []any{p.CompanyID}
	switch {
	case len(p.Statuses) == 1:
		// Plain equality, not ANY: only then does the planner read the
		// status's range of issues_company_status_created (schema v7) in
		// the list's order and stop after the page; with ANY it sorts.
		where, args = append(where, "status = ?"), append(args, string(p.Statuses[0]))
	case len(p.Statuses) > 1:
		st := make([]string, len(p.Statuses))
		for i, v := range p.Statuses {
			st[i] = string(v)
		}
		where, args = append(where, "status = ANY(?::text[])"), append(args, st)
	}
	switch {
	case p.Unassigned:
		where = append(where, "assignee_agent_id IS NULL")
	case p.AssigneeAgentID != "":
		where, args = append(where, "assignee_agent_id = ?"), append(args, p.AssigneeAgentID)
	}
	if p.Query != "" {
		like := "%" + strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(p.Query) + "%"
		where = append(where, `(title ILIKE ? OR identifier ILIKE ?)`)
		args = append(args, like, like)
	}
	if p.ParentID != "" {
		where, args = append(where, "parent_id = ?"), append(args, p.ParentID) // D9: a parent's children
	}
	if p.Ready {
		where = append(where, "unresolved_blocker_count = 0") // D9
	}
	return store.ListPage(ctx, driver{s}, "issues", store.IssueCols, where, args, p.Page, false, store.ScanIssue,
		func(i *clasp.Issue) string { return store.EncodeCursor(i.CreatedAt, i.ID) })
}
