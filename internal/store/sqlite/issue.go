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

// InList is store.Driver.InList: IN with one placeholder a value.
func (*Driver) InList(col string, values []string) (string, []any) {
	args := make([]any, len(values))
	for i, v := range values {
		args[i] = v
	}
	return col + " IN (?" + strings.Repeat(", ?", len(values)-1) + ")", args
}

// LikeFold is store.Driver.LikeFold: LIKE, with \ declared its escape, of
// column and pattern both lower-cased by clasp_fold (fold.go), so that case
// folds for every Unicode letter as PostgreSQL's ILIKE folds it, not for
// ASCII only as SQLite's LIKE does.
func (*Driver) LikeFold(col string) string {
	return foldFunc + "(" + col + ") LIKE " + foldFunc + `(?) ESCAPE '\'`
}
