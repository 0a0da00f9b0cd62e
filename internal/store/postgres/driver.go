package postgres

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/clasp-dev/clasp/internal/store"
)

// driver is the store.Driver of a Store: every statement on the pool, its
// own implicit transaction (one round trip); writes retried on a deadlock
// or serialization failure (Store.retry).
type driver struct{ s *Store }

var _ store.Driver = driver{}

// Read returns the pool's Querier.
func (d driver) Read() store.Querier { return pooled{d.s.pool} }

// Write runs fn with the pool's Querier under Store.retry (fn may run more
// than once; a success wakes the activity streams).
func (d driver) Write(ctx context.Context, fn func(store.Querier) error) error {
	return d.s.retry(ctx, func() error { return fn(pooled{d.s.pool}) })
}

// WriteQuiet is Write for statements that write no activity row: a
// success does not wake the activity streams (Store.retryQuiet).
func (d driver) WriteQuiet(ctx context.Context, fn func(store.Querier) error) error {
	return d.s.retryQuiet(ctx, func() error { return fn(pooled{d.s.pool}) })
}

// WriteTx runs fn's statements in one transaction (Store.tx: run again
// whole on a deadlock or serialization failure; a success wakes the
// activity streams; its error translated).
func (d driver) WriteTx(ctx context.Context, fn func(store.Querier) error) error {
	return d.s.tx(ctx, func(tx pgx.Tx) error { return fn(pooled{tx}) })
}

// Select runs query, its ? placeholders numbered $1, $2, ..., on the pool.
func (d driver) Select(ctx context.Context, query string, args ...any) (store.Rows, error) {
	return d.s.pool.Query(ctx, numbered(query), args...)
}

func (driver) NoRows(err error) bool     { return errors.Is(err, pgx.ErrNoRows) }
func (driver) Unique(err error) bool     { return isUnique(err) }
func (driver) Translate(err error) error { return translate(err) }
func (d driver) NewID() string           { return d.s.newID() }

// pooled runs named statements on db (the pool, or a transaction), their
// @names bound from Args.
type pooled struct{ db pgxQuerier }

// pgxQuerier is what *pgxpool.Pool and pgx.Tx share.
type pgxQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func (p pooled) QueryRow(ctx context.Context, name string, args store.Args) store.Row {
	return p.db.QueryRow(ctx, q(name), namedArgs(args))
}

func (p pooled) Query(ctx context.Context, name string, args store.Args) (store.Rows, error) {
	return p.db.Query(ctx, q(name), namedArgs(args))
}

func (p pooled) Exec(ctx context.Context, name string, args store.Args) (int64, error) {
	tag, err := p.db.Exec(ctx, q(name), namedArgs(args))
	return tag.RowsAffected(), err
}

// numbered replaces each ? of q by $1, $2, ... in order (q holds no other ?).
func numbered(q string) string {
	var b strings.Builder
	n := 0
	for _, part := range strings.SplitAfter(q, "?") {
		if strings.HasSuffix(part, "?") {
			n++
			b.WriteString(part[:len(part)-1] + "$" + strconv.Itoa(n))
			continue
		}
		b.WriteString(part)
	}
	return b.String()
}
