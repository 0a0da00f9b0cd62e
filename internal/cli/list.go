package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/clasp-dev/clasp/client"
)

// listFlags are the paging flags of list commands.
type listFlags struct {
	limit  int
	cursor string
	all    bool
}

func (l *listFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.IntVar(&l.limit, "limit", 0, "rows per page, 1-1000 (default: the server's, 100)")
	f.StringVar(&l.cursor, "cursor", "", "resume after a previous page (the cursor it printed)")
	f.BoolVar(&l.all, "all", false, "follow every page (Link rel=\"next\")")
}

// collect returns the items of first, and of every following page when all
// is set, and the cursor of the first unread page ("" when none remains).
func collect[T any](ctx context.Context, first *client.Page[T], all bool) ([]T, string, error) {
	if all {
		items, err := first.All(ctx)
		return items, "", err
	}
	return first.Items, first.NextCursor(), nil
}

// emitList prints a list (JSON array or table) and, for people, how to get
// the next page.
func emitList[T any](a *app, items []T, next string, table func(w io.Writer, items []T)) error {
	if items == nil {
		items = []T{}
	}
	if err := a.emit(items, func(w io.Writer) { table(w, items) }); err != nil {
		return err
	}
	if next != "" && !a.jsonOut {
		fmt.Fprintf(a.stderr, "more rows: add --cursor %s (or --all)\n", next)
	}
	return nil
}
