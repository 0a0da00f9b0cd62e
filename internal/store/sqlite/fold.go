package sqlite

import (
	"database/sql/driver"
	"strings"

	"modernc.org/sqlite"
)

// foldFunc is the SQL function clasp_fold(x): x lower-cased as Go's
// strings.ToLower lower-cases it, Unicode letters included (SQLite's own
// LIKE and lower() fold ASCII only), so that LikeFold matches case as
// PostgreSQL's ILIKE does. NULL gives NULL; a number is returned as is.
const foldFunc = "clasp_fold"

// init registers clasp_fold with the "sqlite" driver, for every connection
// opened after it: registration is process-wide, and init runs before Open
// can open one.
func init() {
	if err := sqlite.RegisterDeterministicScalarFunction(foldFunc, 1, fold); err != nil {
		panic("sqlite: register " + foldFunc + ": " + err.Error())
	}
}

// fold is clasp_fold: it takes one argument, a text (string or []byte),
// NULL or a number, and returns the text lower-cased, or the argument as
// is when it is not a text.
func fold(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
	switch v := args[0].(type) {
	case string:
		return strings.ToLower(v), nil
	case []byte:
		return strings.ToLower(string(v)), nil
	default:
		return v, nil
	}
}
