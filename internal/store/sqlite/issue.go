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
// ASCII only as SQLite's LIKE does. For an ASCII pattern, SQLite's own LIKE
// folds an ASCII value exactly as clasp_fold would, so the Go function,
// several times slower per row, runs only on the values that are not
// ASCII (more bytes than characters).
func (*Driver) LikeFold(col, pattern string) (string, []any) {
	folded := foldFunc + "(" + col + ") LIKE " + foldFunc + `(?) ESCAPE '\'`
	if !isASCII(pattern) {
		return folded, []any{pattern}
	}
	return "(" + col + ` LIKE ? ESCAPE '\' OR (length(` + col + ") <> length(CAST(" + col + " AS BLOB)) AND " + folded + "))",
		[]any{pattern, pattern}
}

// isASCII reports whether s holds only ASCII characters.
func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
