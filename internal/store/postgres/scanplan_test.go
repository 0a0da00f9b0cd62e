package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/clasp-dev/clasp/internal/store"
	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
)

// scanDests are destinations of the shapes the lock answers scan into:
// strings, a **string, a bool, an int and store's time wrappers.
type scanDests struct {
	id, text string
	null     *string
	ok       bool
	n        int64
	at, nt   time.Time
	ntp      *time.Time
}

func (d *scanDests) dest() []any {
	return []any{&d.id, &d.text, &d.null, &d.ok, &d.n, store.Time(&d.at), store.NullTime(&d.ntp), store.Time(&d.nt)}
}

// TestPlannedRowScansLikePgx: plannedRow scans a row as pgx's own Scan
// does, with NULLs and non-NULLs in the same column, also from kept plans;
// a row of another shape under the same name is planned afresh; and a
// NULL into a string fails with pgx's error.
func TestPlannedRowScansLikePgx(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testURL(t))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	const sql = `SELECT $1::uuid, $2::text, $3::text, $4::bool, $5::bigint, $6::timestamptz, $7::timestamptz, $6::timestamptz`
	name := fmt.Sprintf("test plannedRow %d", time.Now().UnixNano())
	at := time.Date(2026, 12, 1, 18, 0, 0, 123456000, time.UTC)
	const id = "8c7f8e8a-3c1e-4a44-9d3c-6b1f0f0c2a11"
	for i, args := range [][]any{
		{id, "a", nil, true, int64(7), at, nil},
		{id, "b", "not null", false, int64(-1), at, at},
		{id, "", nil, true, int64(0), at.Add(time.Hour), at},
	} {
		var want scanDests
		if err := conn.QueryRow(ctx, sql, args...).Scan(want.dest()...); err != nil {
			t.Fatalf("row %d, pgx: %v", i, err)
		}
		for try := range 2 { // the first row plans, every later scan uses the kept plans
			var got scanDests
			if err := conn.QueryRow(ctx, sql, args...).Scan(plannedRow{name: name, dest: got.dest()}); err != nil {
				t.Fatalf("row %d, try %d: %v", i, try, err)
			}
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(scanDests{})); diff != "" {
				t.Errorf("row %d, try %d: plannedRow scanned otherwise than pgx (-pgx +planned):\n%s", i, try, diff)
			}
		}
	}
	if _, ok := scanPlans.Load(name); !ok {
		t.Errorf("no plans kept for %q", name)
	}
	// Another shape under the same name: fewer columns, other types.
	var n int64
	var s string
	if err := conn.QueryRow(ctx, `SELECT 42::bigint, 'x'::text`).Scan(plannedRow{name: name, dest: []any{&n, &s}}); err != nil || n != 42 || s != "x" {
		t.Errorf("other shape: %d, %q, %v; want 42, \"x\"", n, s, err)
	}
	// A NULL into a string: pgx's error, naming the column.
	wantErr := conn.QueryRow(ctx, `SELECT NULL::text AS c`).Scan(&s)
	gotErr := conn.QueryRow(ctx, `SELECT NULL::text AS c`).Scan(plannedRow{name: name + " null", dest: []any{&s}})
	if wantErr == nil || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Errorf("NULL into a string: %v; pgx says %v", gotErr, wantErr)
	}
	// A count mismatch fails too.
	if err := conn.QueryRow(ctx, `SELECT 1::bigint, 2::bigint`).Scan(plannedRow{name: name + " count", dest: []any{&n}}); err == nil {
		t.Error("two columns into one destination: no error")
	}
}
