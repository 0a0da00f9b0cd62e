package postgres

import (
	"context"
	"strings"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// IssueList lists issues of a company, newest first, narrowed to statuses,
// an assignee (or unassigned ones) and a case-insensitive substring of the
// title or identifier when set.
func (s *Driver) IssueList(ctx context.Context, p *store.IssueListParams) ([]*clasp.Issue, string, error) {
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
	return store.ListPage(ctx, s, "issues", store.IssueCols, where, args, p.Page, false, store.ScanIssue,
		func(i *clasp.Issue) string { return store.EncodeCursor(i.CreatedAt, i.ID) })
}
