package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// IssueCreate creates an issue with the next identifier PREFIX-N of its
// company. Status defaults to backlog, priority to medium. With
// p.Idempotency, a repeat of an earlier creation creates nothing and
// returns that issue as it is now (store.IdempotencyParams), and the record
// of a new creation is written in the same transaction. Errors: 400
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
	var out *clasp.Issue
	err := s.write(ctx, func(tx *wtx) error {
		if id, err := tx.idempotencyLookup(ctx, p.Idempotency, store.IdemIssue); err != nil || id != "" {
			if err != nil {
				return err
			}
			out, err = tx.issueByID(ctx, id)
			p.Idempotency.Replayed = err == nil
			return err
		}
		var (
			n      int64
			prefix string
		)
		err := tx.queryRow(ctx, "NextIdentifier", sql.Named("company", p.CompanyID)).Scan(&n, &prefix)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("company", p.CompanyID)
		}
		if err != nil {
			return fmt.Errorf("next identifier of company %s: %w", p.CompanyID, err)
		}
		if p.AssigneeAgentID != "" {
			if err := tx.agentInCompany(ctx, p.AssigneeAgentID, p.CompanyID, "assigneeAgentId"); err != nil {
				return err
			}
		}
		var started, completed, cancelled any
		switch status {
		case clasp.IssueInProgress:
			started = tx.now
		case clasp.IssueDone:
			completed = tx.now
		case clasp.IssueCancelled:
			cancelled = tx.now
		}
		ident := prefix + "-" + strconv.FormatInt(n, 10)
		iss, err := store.ScanIssue(tx.queryRow(ctx, "IssueInsert", sql.Named("id", tx.s.newID()), sql.Named("company", p.CompanyID),
			sql.Named("identifier", ident), sql.Named("title", title), sql.Named("description", p.Description),
			sql.Named("status", string(status)), sql.Named("priority", string(priority)), sql.Named("priority_rank", priority.Rank()),
			sql.Named("assignee", nullable(p.AssigneeAgentID)), sql.Named("started", started), sql.Named("completed", completed),
			sql.Named("cancelled", cancelled), sql.Named("now", tx.now)))
		if err != nil {
			return fmt.Errorf("create issue %s: %w", ident, err)
		}
		if err := tx.logActivity(ctx, iss.CompanyID, a, clasp.ActionIssueCreated, "issue", iss.ID, map[string]any{
			"identifier": iss.Identifier, "title": iss.Title, "status": iss.Status, "priority": iss.Priority,
			"assigneeAgentId": iss.AssigneeAgentID,
		}); err != nil {
			return err
		}
		// D2, D5: its parent and blockers, in the same transaction
		if out, err = store.ApplyCreateDeps(ctx, writer{tx}, driver{tx.s}, iss, p); err != nil {
			return err
		}
		return tx.idempotencyRecord(ctx, p.Idempotency, store.IdemIssue, iss.ID)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// issueByID reads an issue by id in the write transaction.
func (t *wtx) issueByID(ctx context.Context, id string) (*clasp.Issue, error) {
	iss, err := store.ScanIssue(t.queryRow(ctx, "IssueByID", sql.Named("id", id)))
	if err != nil {
		return nil, fmt.Errorf("get issue %s: %w", id, err)
	}
	return iss, nil
}

// IssueList lists issues of a company, newest first, narrowed to statuses,
// an assignee (or unassigned ones) and a case-insensitive substring of the
// title or identifier when set.
func (s *Store) IssueList(ctx context.Context, p *store.IssueListParams) ([]*clasp.Issue, string, error) {
	where, args := []string{"company_id = ?"}, []any{p.CompanyID}
	if len(p.Statuses) > 0 {
		where = append(where, "status IN (?"+strings.Repeat(", ?", len(p.Statuses)-1)+")")
		for _, st := range p.Statuses {
			args = append(args, string(st))
		}
	}
	switch {
	case p.Unassigned:
		where = append(where, "assignee_agent_id IS NULL")
	case p.AssigneeAgentID != "":
		where, args = append(where, "assignee_agent_id = ?"), append(args, p.AssigneeAgentID)
	}
	if p.Query != "" {
		like := "%" + strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(p.Query) + "%"
		where = append(where, `(title LIKE ? ESCAPE '\' OR identifier LIKE ? ESCAPE '\')`)
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
