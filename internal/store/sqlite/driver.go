package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/clasp-dev/clasp/internal/store"
)

// Read returns the Querier of the reader pool; :now is the store clock.
func (d *Driver) Read() store.Querier { return reader{d} }

// Write runs fn in a write transaction (Store.write); :now is the
// transaction's time.
func (d *Driver) Write(ctx context.Context, fn func(store.Querier) error) error {
	return d.write(ctx, func(tx *wtx) error { return fn(writer{tx}) })
}

// Select runs query, with ? placeholders, on the reader pool.
func (d *Driver) Select(ctx context.Context, query string, args ...any) (store.Rows, error) {
	for i, v := range args {
		args[i] = argValue(v)
	}
	rows, err := d.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

func (*Driver) NoRows(err error) bool     { return errors.Is(err, sql.ErrNoRows) }
func (*Driver) Unique(err error) bool     { return isUnique(err) }
func (*Driver) Translate(err error) error { return translate(err) }
func (d *Driver) NewID() string           { return d.newID() }

// reader runs named SELECTs on the reader pool.
type reader struct{ s *Driver }

func (r reader) QueryRow(ctx context.Context, name string, args store.Args) store.Row {
	return r.s.readRow(ctx, name, named(args, r.s.nowMicros())...)
}

func (r reader) Query(ctx context.Context, name string, args store.Args) (store.Rows, error) {
	rows, err := r.s.read(ctx, name, named(args, r.s.nowMicros())...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

// Exec fails: the reader connections are query_only.
func (reader) Exec(_ context.Context, name string, _ store.Args) (int64, error) {
	return 0, fmt.Errorf("statement %s: a write outside Write", name)
}

// writer runs named statements in one caller's write transaction.
type writer struct{ t *wtx }

func (w writer) QueryRow(ctx context.Context, name string, args store.Args) store.Row {
	return w.t.queryRow(ctx, name, named(args, w.t.now)...)
}

func (w writer) Query(ctx context.Context, name string, args store.Args) (store.Rows, error) {
	rows, err := w.t.query(ctx, name, named(args, w.t.now)...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

func (w writer) Exec(ctx context.Context, name string, args store.Args) (int64, error) {
	res, err := w.t.exec(ctx, name, named(args, w.t.now)...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// Activity records the audit row of the change just made (logActivity):
// SQLite's statements write one table each.
func (w writer) Activity(ctx context.Context, companyID string, actor store.Actor, action, entityType, entityID string, details any) error {
	return w.t.logActivity(ctx, companyID, actor, action, entityType, entityID, details)
}

// RecordIdempotency records, after the creation, that p's
// Idempotency-Key created resource id of kind (idempotencyRecord):
// SQLite's creating statements cannot write a second table.
func (w writer) RecordIdempotency(ctx context.Context, p *store.IdempotencyParams, kind, id string) error {
	return w.t.idempotencyRecord(ctx, p, kind, id)
}

// NextIssueNumber advances the issue counter of companyID (statement
// NextIdentifier) for the IssueInsert that follows: SQLite's IssueInsert
// cannot write the companies table too.
func (w writer) NextIssueNumber(ctx context.Context, companyID string) error {
	_, err := w.Exec(ctx, "NextIdentifier", store.Args{"company": companyID})
	return err
}

// sqlRows adapts *sql.Rows to store.Rows (whose Close returns nothing:
// a failure to close surfaces in Err).
type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { _ = r.Rows.Close() }

// named maps args to sql.Named arguments, times as unix microseconds, and
// binds :now to now (the store clock, or the write transaction's time)
// unless args name it.
func named(args store.Args, now int64) []any {
	out := make([]any, 0, len(args)+1)
	for k, v := range args {
		out = append(out, sql.Named(k, argValue(v)))
	}
	if _, ok := args["now"]; !ok {
		out = append(out, sql.Named("now", now))
	}
	return out
}

// argValue is v as SQLite stores it: a time (or a non-nil *time.Time)
// as unix microseconds, a nil *time.Time as NULL, a []string as a JSON
// array (read with json_each), anything else as it is.
func argValue(v any) any {
	switch x := v.(type) {
	case []string:
		b, _ := json.Marshal(x) // a []string always marshals
		return string(b)
	case time.Time:
		return micros(x)
	case *time.Time:
		if x == nil {
			return nil
		}
		return micros(*x)
	}
	return v
}
