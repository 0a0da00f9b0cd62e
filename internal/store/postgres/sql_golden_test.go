package postgres

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/clasp-dev/clasp/internal/store/sqlfile/sqlfiletest"
)

// TestSQLGolden writes every named statement, exactly as it is prepared
// (its @names rewritten to $n, the mapping in a header comment), to
// testdata/sql/<Name>.sql (with -update) or fails naming the file that
// differs, so a change to a statement shows as a reviewable diff. It also
// fails on a statement the Go code names but no block defines, and on a
// block the Go code never names. It needs no database.
func TestSQLGolden(t *testing.T) {
	if statementsErr != nil {
		t.Fatal(statementsErr)
	}
	stmts := map[string]string{}
	for _, name := range statements.Names() {
		c, err := compileNamed(context.Background(), q(name))
		if err != nil || c == nil {
			t.Fatalf("statement %s: its @names could not be rewritten (%v)", name, err)
		}
		var b strings.Builder
		for i, n := range c.names {
			b.WriteString("-- $" + strconv.Itoa(i+1) + " = @" + n + "\n")
		}
		stmts[name] = b.String() + c.sql
	}
	sqlfiletest.Golden(t, "testdata/sql", stmts)
	sqlfiletest.Names(t, statements.Names(), sqlfiletest.Source{Dir: ".", Runners: map[string]int{"q": 0, "lockRule": 1, "step": 2}},
		sqlfiletest.Source{Dir: "..", Runners: sqlfiletest.SharedRunners})
}
