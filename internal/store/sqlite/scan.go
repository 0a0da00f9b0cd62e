package sqlite

import (
	"database/sql"
	"time"

	"github.com/clasp-dev/clasp/internal/store"
)

// scanAll is store.ScanAll for *sql.Rows.
func scanAll[T any](rows *sql.Rows, scan func(store.Row) (*T, error)) ([]*T, error) {
	return store.ScanAll(sqlRows{rows}, scan)
}

// scanRows reads every row into a T (dest gives the fields to scan into),
// then closes rows; all rows are read before the transaction runs its next
// statement.
func scanRows[T any](rows *sql.Rows, dest func(*T) []any) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(dest(&v)...); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// micros is t as unix microseconds (the storage format of every time column).
func micros(t time.Time) int64 { return t.UnixMicro() }

// fromMicros is the UTC time of unix microseconds v.
func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

// nullable is s, or nil (SQL NULL) when s is empty.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}
