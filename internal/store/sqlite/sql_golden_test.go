package sqlite

import (
	"maps"
	"slices"
	"testing"

	"github.com/clasp-dev/clasp/internal/store/sqlfile/sqlfiletest"
)

// TestSQLGolden writes every named statement, exactly as Open prepares
// it, to testdata/sql/<Name>.sql (with -update) or fails naming the file
// that differs, so a change to a statement shows as a reviewable diff. It
// also fails on a statement the Go code names but no block defines, and
// on a block the Go code never names.
func TestSQLGolden(t *testing.T) {
	stmts, err := statements()
	if err != nil {
		t.Fatal(err)
	}
	sqlfiletest.Golden(t, "testdata/sql", stmts)
	sqlfiletest.Names(t, slices.Collect(maps.Keys(stmts)),
		sqlfiletest.Source{Dir: ".", Runners: map[string]int{"exec": 1, "queryRow": 1, "query": 1, "readRow": 1, "read": 1, "step": 1, "logRule": 1}},
		sqlfiletest.Source{Dir: "..", Runners: sqlfiletest.SharedRunners})
}
