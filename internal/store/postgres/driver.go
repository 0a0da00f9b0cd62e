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

// Read returns the pool's Querier.
func (d *Driver) Read() store.Querier { return pooled{d.pool} }

// Write runs fn with the pool's Querier under Store.retry (fn may run more
// than once; a success wakes the activity streams).
func (d *Driver) Write(ctx context.Context, fn func(store.Querier) error) error {
	return d.retry(ctx, func() error { return fn(pooled{d.pool}) })
}

// WriteQuiet is Write for statements that write no activity row: a
// success does not wake the activity streams (Store.retryQuiet).
func (d *Driver) WriteQuiet(ctx context.Context, fn func(store.Querier) error) error {
	return d.retryQuiet(ctx, func() error { return fn(pooled{d.pool}) })
}

// WriteTx runs fn's statements in one transaction (Store.tx: run again
// whole on a deadlock or serialization failure; a success wakes the
// activity streams; its error translated).
func (d *Driver) WriteTx(ctx context.Context, fn func(store.Querier) error) error {
	return d.tx(ctx, func(tx pgx.Tx) error { return fn(pooled{tx}) })
}

// Select runs query, its ? placeholders numbered $1, $2, ..., on the pool.
func (d *Driver) Select(ctx context.Context, query string, args ...any) (store.Rows, error) {
	return d.pool.Query(ctx, numbered(query), args...)
}

func (*Driver) NoRows(err error) bool     { return errors.Is(err, pgx.ErrNoRows) }
func (*Driver) Unique(err error) bool     { return isUnique(err) }
func (*Driver) Translate(err error) error { return translate(err) }
func (d *Driver) NewID() string           { return d.newID() }

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
