// Package postgres is the PostgreSQL implementation of store.Store, on a
// pgx v5 connection pool, for several clasp servers (replicas) sharing one
// database.
//
// Every lock rule of SPEC section 4 is ONE conditional statement, run as
// its own implicit transaction (one round trip): a data-modifying CTE that
// reads the row and the state of the runs it names from the
// statement's snapshot, decides, writes the issue only if its row is still
// the version it read (compare-and-set; the statement runs again on a
// fresh snapshot otherwise), writes the activity rows of the change and
// answers the row with the old lock columns (lock.go). A refusal writes and
// locks nothing. Liveness, leases and timestamps use the database clock
// (now(), the transaction's start), never a replica's, so replicas whose
// clocks disagree still agree on who is live. Per-company identifiers come
// from a row-locked counter in the creating statement, and both sweeper
// passes lock their candidates FOR UPDATE in id order and re-check them on
// the latest rows, so any number of replicas may create and sweep at once.
//
// Open applies the embedded migrations (goose, PostgreSQL dialect) under a
// session advisory lock, so replicas starting together migrate once.
// Deadlocks and serialization failures (40P01, 40001) are retried a few
// times inside the store. Only internal/cli and tests import this package;
// the server sees store.Store.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/clasp-dev/clasp/internal/store"
	"github.com/clasp-dev/clasp/internal/store/sqlfile"
)

var _ store.Store = (*Store)(nil)

// Options configures Open. The zero value is valid.
type Options struct {
	// Logger receives migration messages (default: discard).
	Logger *slog.Logger
	// Schema, when set, is the schema the store's tables live in: it is
	// created if missing and is the connections' search_path (tests give
	// each store its own). Default: the URL's own search_path (public).
	Schema string
	// MaxConns caps the pool's connections. Zero: the URL's
	// pool_max_conns when it sets one, else DefaultMaxConns (not
	// pgxpool's own default, max(4, NumCPU), which on a small host
	// throttles a fleet to 4 statements in flight).
	MaxConns int32
	// StatementTimeout, when positive, is the statement_timeout of the
	// pool's connections (whole milliseconds): the database cancels a
	// statement that runs longer, lock waits and a commit's wait for a
	// synchronous standby included (57014, answered 503 unavailable), so
	// a request the server gave up on at its deadline is over on the
	// database no later than this after its last statement was sent.
	// Migrations run without it. Zero: the URL's or the server's setting.
	StatementTimeout time.Duration
}

// DefaultMaxConns is the pool size of a store whose Options and URL set
// none. Throughput on PostgreSQL is bounded by statements in flight, each
// waiting mostly on the database (commit fsync, locks), not on this
// process's CPUs: with synchronous_commit=on, concurrent commits share one
// WAL flush only if enough of them are in flight. 20 keeps a fleet of a
// few dozen agents from queueing for 4 connections (measured: 472 vs 594
// cycles/s at 32 clients with 4 vs 8 connections, the same with 16 or 40,
// on 2 shared cores), while 4 replicas (each with 20 plus its LISTEN
// connection) stay under PostgreSQL's default max_connections of 100.
const DefaultMaxConns = 20

// Store is the PostgreSQL store. It is safe for concurrent use; Close it
// when done.
type Store struct {
	store.CRUD      // the methods shared with the other dialects, on driver{s}
	store.Heartbeat // the shared HeartbeatStore methods, on driver{s} and s.hb()
	*store.Locks    // the checkout and release rules, on driver{s}
	store.Runs      // a run's end and the sweeper's passes, on driver{s}

	pool   *pgxpool.Pool
	schema string
	log    *slog.Logger
	newID  func() string

	w watch // live events: WatchActivity channels, notifier, listener (watch.go)

	claims claimQueues // this process's claims of unassigned issues, batched behind the one running (IssueClaim)

	claimSeen func(try int) // tests only: called when a claim that took nothing saw an eligible issue (claimOne), before its pause
}

// Open connects to the database at url (a postgres:// URL or a key=value
// DSN, as pgx reads it), applies the pending migrations under an advisory
// lock, and returns the store. Errors: an invalid URL or Schema, an
// unreachable database, a failed migration.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("open postgres store: parse url: %w", err)
	}
	switch {
	case opts.MaxConns > 0:
		cfg.MaxConns = opts.MaxConns
	case !strings.Contains(url, "pool_max_conns"):
		cfg.MaxConns = DefaultMaxConns
	}
	if opts.StatementTimeout > 0 {
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(max(1, opts.StatementTimeout.Milliseconds()), 10)
	}
	if _, set := cfg.ConnConfig.RuntimeParams["jit"]; !set {
		// Every statement of the store touches a few rows by index. JIT
		// compilation costs 0.1 to 1 s of CPU and pays off only on scans of
		// millions of rows, yet the planner's estimate for a limit it cannot
		// see (a count, a parameter) crosses jit_above_cost once a company
		// holds a million issues. A jit=on in the URL still wins.
		cfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
	if opts.Schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{opts.Schema}.Sanitize()
	}
	s := &Store{schema: opts.Schema, log: opts.Logger, newID: newUUIDv7}
	s.CRUD = store.NewCRUD(driver{s})
	s.Heartbeat = store.NewHeartbeat(driver{s}, s.hb())
	s.Locks = store.NewLocks(driver{s}, s.CRUD)
	s.Runs = store.NewRuns(driver{s}, s.CRUD)
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	if err := s.pool.Ping(ctx); err != nil {
		s.pool.Close()
		return nil, fmt.Errorf("open postgres store: connect to %s: %w", cfg.ConnConfig.Host, err)
	}
	if err := s.migrate(ctx); err != nil {
		s.pool.Close()
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	if err := s.prepare(ctx); err != nil {
		s.pool.Close()
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	s.startWatch(ctx, cfg.ConnConfig.Copy())
	return s, nil
}

// QueryRowNamed runs statement name of sql/*.sql with its @name
// arguments args on the store's pool, as the store runs its statements
// (its own implicit transaction, one round trip, the rewrite of the names
// to placeholders cached), and returns its row. It is for a tool that
// measures the store's own statements without its Go code (clasp bench's
// raw limit): it applies none of the store's rules, retries nothing and
// wakes no activity stream.
func (s *Store) QueryRowNamed(ctx context.Context, name string, args map[string]any) pgx.Row {
	return s.pool.QueryRow(ctx, q(name), namedArgs(args))
}

// Close stops the event listener and closes the pool, waiting for
// connections in use to be returned.
func (s *Store) Close() error {
	s.stopWatch()
	s.pool.Close()
	return nil
}

// Ping checks that the database answers a query (for /readyz); 503
// unavailable when it does not.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.pool.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		return translate(fmt.Errorf("ping postgres: %w", err))
	}
	return nil
}

// maxAttempts bounds the tries of a write that fails with a deadlock or a
// serialization failure (the database rolled it back, so it is safe to run
// again).
const maxAttempts = 5

// retry runs fn until it succeeds, fails with an error that is not a
// deadlock or serialization failure, or has been tried maxAttempts times,
// sleeping a few random milliseconds between tries. It returns fn's last
// error translated (see translate).
func (s *Store) retry(ctx context.Context, fn func() error) error {
	return s.retryNotify(ctx, fn, true)
}

// retryQuiet is retry for statements that never write activity (the
// authentication's record of a key's use, a run's lease renewal): it does
// not wake the activity streams nor the other replicas.
func (s *Store) retryQuiet(ctx context.Context, fn func() error) error {
	return s.retryNotify(ctx, fn, false)
}

// retryNotify is retry; notify says whether a success may have written
// activity.
func (s *Store) retryNotify(ctx context.Context, fn func() error, notify bool) error {
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil {
			if notify {
				s.activityWritten() // may have written activity: wake streams here and on other replicas
			}
			return nil
		}
		if attempt == maxAttempts || !retryable(err) {
			return translate(err)
		}
		t := time.NewTimer(backoff(attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return translate(err)
		case <-t.C:
		}
	}
}

// tx runs fn in one transaction (READ COMMITTED) and commits it if fn
// returns nil, retrying the whole transaction on a deadlock or
// serialization failure (see retry). fn must touch the database only
// through tx and may run more than once.
func (s *Store) tx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return s.retry(ctx, func() error { return pgx.BeginFunc(ctx, s.pool, fn) })
}

// retryable reports whether err is a deadlock (40P01) or a serialization
// failure (40001), after which the statement's transaction was rolled back.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

// backoff is the pause before try attempt+1: 1-2 ms, doubling.
func backoff(attempt int) time.Duration {
	base := time.Millisecond << (attempt - 1)
	return base + rand.N(base) // #nosec G404 -- retry jitter, not a secret
}

//go:embed sql/*.sql
var sqlFiles embed.FS

// statements are the named statements of sql/*.sql and the variants
// derived from them (PatchPlain, byIdentifier); statementsErr says why they did not
// load (a block that does not parse, a name defined twice, a fragment use
// that does not expand or a fragment nothing uses, a variant whose
// replaced line is not there exactly once or whose cut regions are not
// well marked), and Open returns it.
var statements, statementsErr = loadStatements()

// The look-up of the issue in CTE old of Checkout, Release and Patch, by
// id, and the same look-up by identifier.
const (
	lookupByID         = "WHERE i.id = @rid::text AND"
	lookupByIdentifier = "WHERE i.identifier = @rident::text AND"
)

// byIdentifier names the statements that have a variant for an issue
// named by its identifier (PREFIX-N), called <name>ByIdentifier: the
// statement with its look-up by id replaced by the look-up by identifier,
// so that each variant finds the issue with one index look-up and no
// other (lock.go's byRef picks one from the reference).
var byIdentifier = []string{"Checkout", "Release", "Patch", "PatchPlain"}

// The marker lines around the parts of Patch that only a PATCH with a
// comment or an Idempotency-Key needs (sqlfile.Set.Cut).
const (
	patchExtraBegin = "-- [comment or Idempotency-Key"
	patchExtraEnd   = "-- ]"
)

// loadStatements loads sql/*.sql, its fragments expanded, and derives
// from that text PatchPlain (Patch without its comment and
// Idempotency-Key parts) and the byIdentifier variants.
func loadStatements() (*sqlfile.Set, error) {
	set, err := sqlfile.Load(sqlFiles, "sql/*.sql")
	if err != nil {
		return nil, err
	}
	if err := set.Cut("PatchPlain", "Patch", patchExtraBegin, patchExtraEnd,
		"Patch for a PATCH with neither comment nor Idempotency-Key: no CTE com or rec, no issue.commented row."); err != nil {
		return nil, err
	}
	for _, name := range byIdentifier {
		doc := name + " of an issue named by its identifier (@rident, PREFIX-N) instead of its id."
		if err := set.Derive(name+"ByIdentifier", name, lookupByID, lookupByIdentifier, doc); err != nil {
			return nil, err
		}
	}
	return set, nil
}

// q returns the text of the named statement, to run with namedArgs. A
// name no statement has is returned as it is, so that running it fails as
// SQL (TestSQLGolden checks that every name the package uses exists).
func q(name string) string {
	if st, ok := statements.Get(name); ok {
		return st.SQL
	}
	return name
}

// prepare checks at open that every named statement prepares against the
// migrated schema, as it runs: with its @names rewritten to $n
// (namedArgs). Each connection then prepares and caches a statement on
// its first use (pgx's statement cache).
func (s *Store) prepare(ctx context.Context) error {
	if statementsErr != nil {
		return statementsErr
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("prepare statements: %w", err)
	}
	defer conn.Release()
	for _, name := range statements.Names() {
		c, err := compileNamed(ctx, q(name))
		if err == nil && c == nil {
			err = errors.New("its @names could not be rewritten")
		}
		if err == nil {
			_, err = conn.Conn().Prepare(ctx, "", c.sql)
		}
		if err != nil {
			return fmt.Errorf("prepare statement %s: %w", name, err)
		}
	}
	return nil
}

func newUUIDv7() string {
	u, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return u.String()
}
