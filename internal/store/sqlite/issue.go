package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

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
func (s *Driver) IssueList(ctx context.Context, p *store.IssueListParams) ([]*clasp.Issue, string, error) {
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
	return store.ListPage(ctx, s, "issues", store.IssueCols, where, args, p.Page, false, store.ScanIssue,
		func(i *clasp.Issue) string { return store.EncodeCursor(i.CreatedAt, i.ID) })
}
