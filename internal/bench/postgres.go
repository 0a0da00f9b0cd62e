package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/clasp-dev/clasp/internal/store"
	"github.com/clasp-dev/clasp/internal/store/postgres"
)

// newSchemaName returns a fresh schema name for a bench store: the run's
// server and its raw limit each get one, dropped at the end.
func newSchemaName(what string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "clasp_bench_" + what + "_" + hex.EncodeToString(b)
}

// dropSchema drops schema (and everything in it) from the database at url.
func dropSchema(url, schema string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	return err
}

// synchronousCommit returns the database's synchronous_commit setting.
func synchronousCommit(ctx context.Context, url string) (string, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	var v string
	err = conn.QueryRow(ctx, "SHOW synchronous_commit").Scan(&v)
	return v, err
}

// openPostgres opens a store in a fresh schema of the database at url,
// with a pool of conns connections whose backends carry application_name
// app (none when ""), and returns it and the schema's name; the returned
// drop closes it and drops the schema.
func openPostgres(ctx context.Context, url, what, app string, conns int) (*postgres.Driver, string, func(), error) {
	schema := newSchemaName(what)
	dsn := url
	if app != "" {
		dsn = withAppName(url, app)
	}
	st, err := postgres.Open(ctx, dsn, postgres.Options{Schema: schema, MaxConns: int32(conns)}) // #nosec G115 -- conns is the bench's client count plus a few, far below 2^31
	if err != nil {
		_ = dropSchema(url, schema)
		return nil, "", nil, fmt.Errorf("bench: open a PostgreSQL store in schema %s: %w", schema, err)
	}
	return st, schema, func() {
		_ = st.Close()
		_ = dropSchema(url, schema)
	}, nil
}

// startPostgresTarget serves, in this process, a store in a fresh schema of
// cfg.DatabaseURL (dropped when the target closes), with a connection per
// client (plus some for the sweeper and the setup). what names the schema
// (clasp_bench_<what>_<random>); mon, when not nil, probes its backends'
// CPU.
func startPostgresTarget(ctx context.Context, cfg Config, what string, hc *http.Client, mon *pgMonitor) (*target, error) {
	sc, err := synchronousCommit(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("bench: connect to --database-url: %w", err)
	}
	app := newSchemaName(what + "_app")
	st, schema, drop, err := openPostgres(ctx, cfg.DatabaseURL, what, app, slicesMax(cfg.Clients)+8)
	if err != nil {
		return nil, err
	}
	t, err := serveStore(ctx, closeFunc{store.New(st), drop}, hc)
	if err != nil {
		drop()
		return nil, err
	}
	t.sync = sc
	t.pgURL, t.pgSchema = cfg.DatabaseURL, schema
	t.db = mon.probe(app)
	t.describe = fmt.Sprintf("in-process PostgreSQL store (fresh schema, synchronous_commit=%s) at %s", sc, t.api.base)
	return t, nil
}

// closeFunc is a store whose Close also drops its schema.
type closeFunc struct {
	*store.DB
	drop func()
}

func (c closeFunc) Close() error { c.drop(); return nil }

// newPostgresRaw returns the raw limit on a fresh schema of url (its own
// store, fixture as setupRawFixture, a connection per goroutine): sqlCheckout
// and sqlRelease straight through pgx (postgresRawCheckout, raw.go). The schema is dropped
// by the returned drop; open and close are no-ops (the pool stays open for
// the run).
// mon, when not nil, probes its backends' CPU.
func newPostgresRaw(ctx context.Context, url string, mon *pgMonitor, nAgents, nIssues int) (*rawTarget, func(), error) {
	sc, err := synchronousCommit(ctx, url)
	if err != nil {
		return nil, nil, fmt.Errorf("bench: connect to --database-url: %w", err)
	}
	app := newSchemaName("raw_app")
	st, _, drop, err := openPostgres(ctx, url, "raw", app, nAgents+4)
	if err != nil {
		return nil, nil, err
	}
	steps, err := setupRawFixture(ctx, store.New(st), nAgents, nIssues)
	if err != nil {
		drop()
		return nil, nil, fmt.Errorf("bench: raw fixture (PostgreSQL): %w", err)
	}
	return &rawTarget{
		kind:     TargetRaw,
		db:       mon.probe(app),
		sync:     sc,
		steps:    steps,
		open:     func(context.Context) error { return nil },
		close:    func() {},
		checkout: func(ctx context.Context, s rawStep) error { return postgresRawCheckout(ctx, st, s) },
		release:  func(ctx context.Context, s rawStep) error { return postgresRawRelease(ctx, st, s) },
	}, drop, nil
}
