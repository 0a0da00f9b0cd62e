package store

import (
	"context"
	"fmt"
	"time"
)

// The driver seam: Driver is the one interface a dialect
// (internal/store/sqlite, internal/store/postgres) implements, and New
// builds the store on it. A dialect keeps only its statements, the mapping
// of Args to its placeholders, how it opens a transaction, and the
// translation of its errors; what a statement's rows mean, which error a
// caller gets, and in which order statements run is decided here, once.
// A driver may also implement ClaimBatcher (claims in one statement),
// txWriter (several statements in one transaction where its Write runs
// each on its own) and HookForcer (tests only); the shared code asks for
// each by a type assertion and does without it.

// Args are the named parameters of a statement (`:name` in SQLite, `@name`
// in PostgreSQL), by name without the sigil. A name the statement does not
// use is ignored; a name it uses that Args lacks is an error in SQLite and
// NULL in PostgreSQL, so callers pass every name. Values are strings,
// integers, booleans, nil (NULL), *string / *int (nil: NULL) and
// time.Time / *time.Time (the SQLite driver stores them as unix
// microseconds, PostgreSQL as timestamptz).
type Args map[string]any

// Row is one row of a statement: the common subset of *sql.Row and
// pgx.Row. Scan returns the dialect's no-rows error (Driver.NoRows) when
// the statement returned no row.
type Row interface {
	Scan(dest ...any) error
}

// Rows are the rows of a statement: the common subset of *sql.Rows and
// pgx.Rows. Call Next until it is false, then Err; Close releases the rows
// early (it is safe to call more than once).
type Rows interface {
	Row
	Next() bool
	Err() error
	Close()
}

// Querier runs a dialect's named statements (the blocks of its
// sql/*.sql files, by their `-- name:`). A name that no block defines
// fails as SQL.
type Querier interface {
	// QueryRow runs the named statement for its first row; errors
	// (including no row) come from the returned Row's Scan.
	QueryRow(ctx context.Context, name string, args Args) Row
	// Query runs the named statement for its rows; the error is the
	// statement's failure to start.
	Query(ctx context.Context, name string, args Args) (Rows, error)
	// Exec runs the named statement and returns how many rows it changed.
	Exec(ctx context.Context, name string, args Args) (rowsAffected int64, err error)
}

// Driver is the whole of what a dialect implements (internal/store/sqlite,
// internal/store/postgres); New builds the one Store on it. Its methods
// run statements and answer what the database said: none decides a
// refusal, validates input or builds an explanation, which the shared code
// does once. Errors of Read's and Write's statements are the driver's own
// (untranslated) until they pass through Translate; every other method
// answers translated errors.
type Driver interface {
	// Read returns the Querier of reads outside any write (SQLite: the
	// reader pool, which never waits for the writer; PostgreSQL: the
	// pool, each statement its own implicit transaction).
	Read() Querier
	// Write runs fn as one write and returns fn's error translated
	// (Translate). SQLite: fn runs in a transaction of the group-commit
	// writer (its statements see one state and commit together; :now
	// is bound to the transaction's time). PostgreSQL: fn's statements
	// run on the pool, each its own implicit transaction (the rules are
	// one statement each), and fn runs again on a deadlock or
	// serialization failure, so fn must be safe to repeat.
	Write(ctx context.Context, fn func(q Querier) error) error
	// HeartbeatWrite runs fn in one write transaction and commits it when
	// fn returns nil (PostgreSQL: the whole function again on a deadlock
	// or serialization failure, so fn may run more than once). fn gets
	// the transaction's Querier and the dialect's part of a heartbeat
	// transaction (TxDriver), from which NewHeartbeatTx makes the
	// HeartbeatTx the shared algorithms run on.
	HeartbeatWrite(ctx context.Context, fn func(q Querier, x TxDriver) error) error
	// Select runs an ad hoc SELECT with ? placeholders (the lists
	// built by KeysetQuery and ActivityQuery) on the read side.
	Select(ctx context.Context, query string, args ...any) (Rows, error)
	// InList returns the predicate of a Select that column col holds
	// one of values (at least one), and its arguments.
	InList(col string, values []string) (pred string, args []any)
	// LikeFold returns the predicate of a Select that column col matches,
	// case-insensitively for every Unicode letter (not ASCII only), LIKE
	// pattern (% and _ its wildcards, \ their escape), and its arguments.
	LikeFold(col, pattern string) (pred string, args []any)
	// NoRows reports whether err means a statement returned no row.
	NoRows(err error) bool
	// Unique reports whether err is a unique (or primary key) violation.
	Unique(err error) bool
	// Translate maps a database error to the clasp error of the JSON
	// error body (a *clasp.Error passes unchanged, no row is 404
	// not_found, busy or unreachable is 503 unavailable); any other
	// error is returned as it is (an internal failure).
	Translate(err error) error
	// NewID returns a fresh id for a new row (a UUIDv7 by default).
	NewID() string

	lockDriver  // one try of each lock rule (locks.go)
	runDriver   // a run's end and the sweeper's batches (runs.go)
	claimDriver // one try of claim-next (claims.go)

	// ActivityStream is how the dialect tells the streams that activity
	// rows were committed (SQLite: in process; PostgreSQL: LISTEN/NOTIFY,
	// across servers).
	ActivityStream
	// Ping checks that the database answers a query (for /readyz); 503
	// unavailable when it does not.
	Ping(ctx context.Context) error
	// SchemaVersion returns the version of the newest migration applied
	// to the database.
	SchemaVersion(ctx context.Context) (int64, error)
	// Close releases the driver's connections.
	Close() error
}

// Time returns a scan destination for a NOT NULL time column: it accepts
// unix microseconds (int64, as SQLite stores times) or a time.Time
// (PostgreSQL's timestamptz) and stores the time in UTC in *t. Both
// database/sql and pgx honour sql.Scanner destinations.
func Time(t *time.Time) *TimeDest { return &TimeDest{t: t} }

// NullTime is Time for a nullable column: NULL stores nil in *p.
func NullTime(p **time.Time) *NullTimeDest { return &NullTimeDest{p: p} }

// TimeDest is the destination Time returns.
type TimeDest struct{ t *time.Time }

// Scan implements sql.Scanner: int64 unix microseconds or time.Time; an
// error for NULL or any other type.
func (d *TimeDest) Scan(v any) error {
	t, err := scanTime(v)
	if err != nil {
		return err
	}
	if t == nil {
		return fmt.Errorf("scan time: NULL in a NOT NULL column")
	}
	*d.t = *t
	return nil
}

// NullTimeDest is the destination NullTime returns.
type NullTimeDest struct{ p **time.Time }

// Scan implements sql.Scanner: NULL, int64 unix microseconds or
// time.Time; an error for any other type.
func (d *NullTimeDest) Scan(v any) error {
	t, err := scanTime(v)
	if err != nil {
		return err
	}
	*d.p = t
	return nil
}

func scanTime(v any) (*time.Time, error) {
	var t time.Time
	switch x := v.(type) {
	case nil:
		return nil, nil
	case int64:
		t = time.UnixMicro(x)
	case time.Time:
		t = x
	default:
		return nil, fmt.Errorf("scan time: unsupported column value of type %T", v)
	}
	t = t.UTC()
	return &t, nil
}
