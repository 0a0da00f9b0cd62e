package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/clasp-dev/clasp/internal/store"
)

// DriverScan checks the shared scan path of a store.Driver: what the
// shared scan functions (store.ScanIssue, ...) rely on in every dialect.
// query is the dialect's SELECT of one row with the columns, in order:
// NULL text, the text 'x', NULL integer, the integer 7, its ? parameter
// as a time column, NULL time, and the text 'x' again; it is run with one
// argument, a time.Time, through Driver.Select. The check: NULL scans
// into **string / **int as nil and values as pointers to them; the time
// argument comes back through store.Time as the same instant (to the
// microsecond) in UTC; store.NullTime gives nil for NULL; store.Time
// refuses a text column.
func DriverScan(t *testing.T, d store.Driver, query string) {
	t.Helper()
	ctx := context.Background()
	at := time.Date(2026, 3, 4, 5, 6, 7, 891011000, time.FixedZone("X", 3600))
	rows, err := d.Select(ctx, query, at)
	if err != nil {
		t.Fatalf("select: %v", err)
	}
	defer rows.Close()
	if !rows.Next() {
		t.Fatalf("select: no row (err %v)", rows.Err())
	}
	var (
		nullStr, str *string
		nullInt, n   *int
		got          time.Time
		nullTime     = &at
		wrong        time.Time
	)
	err = rows.Scan(&nullStr, &str, &nullInt, &n, store.Time(&got), store.NullTime(&nullTime), store.Time(&wrong))
	if err == nil {
		t.Fatal("scan of a text column into store.Time: no error, want one")
	}
	rows.Close()

	rows, err = d.Select(ctx, query, at)
	if err != nil {
		t.Fatalf("select: %v", err)
	}
	defer rows.Close()
	if !rows.Next() {
		t.Fatalf("select: no row (err %v)", rows.Err())
	}
	var last string
	if err := rows.Scan(&nullStr, &str, &nullInt, &n, store.Time(&got), store.NullTime(&nullTime), &last); err != nil {
		t.Fatalf("scan: %v", err)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("rows: %v", err)
	}
	if nullStr != nil || nullInt != nil || nullTime != nil {
		t.Errorf("NULL columns scanned as %v, %v, %v; want nil, nil, nil", nullStr, nullInt, nullTime)
	}
	if str == nil || *str != "x" || n == nil || *n != 7 || last != "x" {
		t.Errorf("value columns scanned as %v, %v, %q; want x, 7, x", str, n, last)
	}
	want := at.Truncate(time.Microsecond).UTC()
	if !got.Equal(want) || got.Location() != time.UTC {
		t.Errorf("time column = %v (%v), want %v in UTC", got, got.Location(), want)
	}
}
