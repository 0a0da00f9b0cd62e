// Package sqlite is the embedded SQLite implementation of store.Store, on
// modernc.org/sqlite (pure Go, no cgo).
//
// One database file in WAL mode. Every write transaction runs on a single
// writer connection and starts with BEGIN IMMEDIATE, so writers queue in Go
// instead of failing with SQLITE_BUSY; the writes that queue up while a
// commit is in flight share the next commit and its fsync, each under its
// own savepoint (group commit, groupcommit.go). Reads run on a separate
// pool of query-only connections and never wait for the writer. The versioned
// migrations under migration/ are embedded and applied by Open.
//
// The lock rules of SPEC section 4 and the sweeper of SPEC section 5 are in
// lock.go, one conditional statement each, tagged with their rule numbers.
// Only internal/cli and tests import this package; the server sees
// store.Store.
package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/clasp-dev/clasp/internal/store"
	"github.com/clasp-dev/clasp/internal/store/sqlfile"
)

var _ store.Store = (*Store)(nil)

// Options configures Open. The zero value is valid.
type Options struct {
	// Now returns the current time (default time.Now). Every lease, expiry
	// and timestamp decision of the store uses it, read once per
	// transaction; nothing calls time.Now directly.
	Now func() time.Time
	// Logger receives migration and maintenance messages (default: discard).
	Logger *slog.Logger
	// Synchronous is PRAGMA synchronous of the writer: "FULL" (default: a
	// committed write survives power loss) or "NORMAL" (in WAL mode a
	// commit survives a crash of the process, but the last commits may be
	// lost on power loss).
	Synchronous string
	// NewID returns a fresh id for companies, agents, keys, runs, issues
	// and comments (default: a UUIDv7, time-ordered so inserts append to
	// the primary key index).
	NewID func() string
}

// Store is the SQLite store. It is safe for concurrent use; Close it when done.
type Store struct {
	store.CRUD      // the methods shared with the other dialects, on driver{s}
	store.Heartbeat // the shared HeartbeatStore methods, on driver{s} and s.hb()
	*store.Locks    // the checkout and release rules, on driver{s}
	store.Runs      // a run's end and the sweeper's passes, on driver{s}

	w *sql.DB // the writer: exactly one connection, BEGIN IMMEDIATE
	r *sql.DB // readers: several query_only connections

	ws map[string]*sql.Stmt // every named statement, prepared on the writer
	rs map[string]*sql.Stmt // the named SELECTs, prepared on the reader pool

	sqlText map[string]string // the text of every named statement

	migrator *goose.Provider
	now      func() time.Time
	newID    func() string
	log      *slog.Logger

	watch store.Broadcast // WatchActivity channels, woken after commits that wrote activity
	gc    committer       // the writer's queue: group commit (groupcommit.go)

	path     string      // the database file
	diskFull diskFullLog // logs when writes start and stop meeting a full disk (errors.go)
}

// Open opens (creating it and its parent directory if needed) the database
// file at path, applies the pending migrations, and prepares the store's
// statements. The writer connection runs with journal_mode=WAL,
// foreign_keys=ON, busy_timeout=10s and synchronous=opts.Synchronous; the
// reader connections are query_only.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	syncMode := strings.ToUpper(cmp.Or(opts.Synchronous, "FULL"))
	if syncMode != "FULL" && syncMode != "NORMAL" {
		return nil, fmt.Errorf("open sqlite store: synchronous %q: want FULL or NORMAL", opts.Synchronous)
	}
	if path == "" || strings.ContainsRune(path, '?') || strings.HasPrefix(path, "file:") || path == ":memory:" {
		return nil, fmt.Errorf("open sqlite store: path %q: want a plain file path without '?'", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("open sqlite store: create directory: %w", err)
	}
	s := &Store{now: opts.Now, newID: opts.NewID, log: opts.Logger, path: path}
	s.CRUD = store.NewCRUD(driver{s})
	s.Heartbeat = store.NewHeartbeat(driver{s}, s.hb())
	s.Locks = store.NewLocks(driver{s}, s.CRUD)
	s.Runs = store.NewRuns(driver{s}, s.CRUD)
	if s.now == nil {
		s.now = time.Now
	}
	if s.newID == nil {
		s.newID = newUUIDv7
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if err := s.open(ctx, path, syncMode); err != nil {
		_ = s.Close() // the open error is the one returned
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	return s, nil
}

func (s *Store) open(ctx context.Context, path, syncMode string) error {
	var err error
	// _txlock=immediate makes every BeginTx a BEGIN IMMEDIATE: the write
	// lock is taken at the start, so a transaction never fails half-way on
	// a lock upgrade, and the lock rules' reads and writes see one state.
	// temp_store=MEMORY keeps the statement journal of the group-commit
	// savepoints and the temporary tables of RETURNING in memory: with the
	// default, the sub-journal spills to a temporary file past 64 KiB and
	// then every page a request first touches is written there (a pwrite
	// per page in the writer's serial path). A batch is at most maxBatch
	// requests, so the memory stays small.
	s.w, err = sql.Open("sqlite", path+"?_txlock=immediate"+
		"&_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)"+
		"&_pragma=synchronous("+syncMode+")&_pragma=cache_size(-32000)&_pragma=temp_store(MEMORY)")
	if err != nil {
		return err
	}
	s.w.SetMaxOpenConns(1)
	s.w.SetMaxIdleConns(1)
	s.w.SetConnMaxLifetime(0)
	s.w.SetConnMaxIdleTime(0)
	if err := s.w.PingContext(ctx); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	if err := s.migrate(ctx); err != nil {
		return err
	}

	n := max(4, runtime.NumCPU())
	s.r, err = sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=query_only(1)")
	if err != nil {
		return err
	}
	s.r.SetMaxOpenConns(n)
	s.r.SetMaxIdleConns(n)
	s.r.SetConnMaxLifetime(0)
	s.r.SetConnMaxIdleTime(0)

	if err := s.prepareSavepoints(ctx); err != nil {
		return err
	}
	stmts, err := statements()
	if err != nil {
		return err
	}
	s.sqlText, s.ws, s.rs = stmts, make(map[string]*sql.Stmt, len(stmts)), map[string]*sql.Stmt{}
	for _, name := range slices.Sorted(maps.Keys(stmts)) {
		text := stmts[name]
		if s.ws[name], err = s.w.PrepareContext(ctx, text); err != nil {
			return fmt.Errorf("prepare statement %s: %w", name, err)
		}
		if sqlfile.IsSelect(text) {
			if s.rs[name], err = s.r.PrepareContext(ctx, text); err != nil {
				return fmt.Errorf("prepare statement %s on readers: %w", name, err)
			}
		}
	}
	return nil
}

//go:embed sql/*.sql
var sqlFiles embed.FS

// statements returns the text of every named statement, the blocks of
// sql/*.sql with their fragments expanded, by name. Errors: a block that
// does not parse, a name defined twice, a statement with no text, a
// fragment use that does not expand, a fragment nothing uses
// (sqlfile.Load).
func statements() (map[string]string, error) {
	set, err := sqlfile.Load(sqlFiles, "sql/*.sql")
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(set.Names()))
	for _, name := range set.Names() {
		out[name] = set.SQL(name)
	}
	return out, nil
}

// Writer returns the store's writer connection (its one connection, whose
// transactions are BEGIN IMMEDIATE) and a look-up of the statements of
// sql/*.sql prepared on it by name (nil for a name no statement has). It
// is for a tool that runs the store's own statements without its Go code
// (clasp bench's raw limit): a write through it skips group commit and
// applies none of the store's rules, so that tool's store must not share
// its database with a server.
func (s *Store) Writer() (db *sql.DB, stmt func(name string) *sql.Stmt) {
	return s.w, func(name string) *sql.Stmt { return s.ws[name] }
}

// Close closes the statements and both connection pools. It runs PRAGMA
// optimize first (best effort).
func (s *Store) Close() error {
	var errs []error
	for _, st := range s.gc.sp {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	for _, m := range []map[string]*sql.Stmt{s.ws, s.rs} {
		for _, st := range m {
			errs = append(errs, st.Close())
		}
	}
	if s.r != nil {
		errs = append(errs, s.r.Close())
	}
	if s.w != nil {
		_, _ = s.w.Exec("PRAGMA optimize")
		errs = append(errs, s.w.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close sqlite store: %w", err)
	}
	return nil
}

// Ping checks that a reader connection answers a query (for /readyz).
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.r.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return translate(fmt.Errorf("ping sqlite: %w", err))
	}
	return nil
}

// wtx is one caller's write (one call of Store.write) inside a write
// transaction on the writer connection, which it may share with other
// callers' writes (group commit, groupcommit.go). now is the write's time
// (unix µs), read once from Options.Now when its function starts.
type wtx struct {
	b   *txBatch
	s   *Store
	now int64

	wroteActivity bool // set by logActivity: wake the watchers after commit
}

// stmt returns the named statement bound to the transaction, and the
// context to run it with. A statement, once started, runs to its end: if
// ctx has ended already, the returned ctx is ctx itself, so that
// database/sql fails the call before it reaches SQLite; otherwise it is a
// context that never ends. SQLite answers a write interrupted inside a
// transaction by rolling back the whole transaction, which group commit
// shares with other requests; and the driver watches a cancelable context
// with a goroutine and a progress handler per statement, which a write of
// a few hundred microseconds does not need. A name no statement has gives
// nil (the callers then run the name itself, which fails as SQL).
func (t *wtx) stmt(ctx context.Context, name string) (*sql.Stmt, context.Context) {
	if ctx.Err() == nil {
		ctx = context.Background()
	}
	st := t.b.stmts[name]
	if st == nil {
		ws := t.s.ws[name]
		if ws == nil {
			return nil, ctx
		}
		st = t.b.tx.Stmt(ws)
		t.b.stmts[name] = st
	}
	return st, ctx
}

// exec runs the named statement in the transaction.
func (t *wtx) exec(ctx context.Context, name string, args ...any) (sql.Result, error) {
	st, ctx := t.stmt(ctx, name)
	if st == nil {
		return t.b.tx.ExecContext(ctx, name, args...)
	}
	return st.ExecContext(ctx, args...)
}

// queryRow runs the named statement in the transaction for one row.
func (t *wtx) queryRow(ctx context.Context, name string, args ...any) *sql.Row {
	st, ctx := t.stmt(ctx, name)
	if st == nil {
		return t.b.tx.QueryRowContext(ctx, name, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// query runs the named statement in the transaction for its rows.
func (t *wtx) query(ctx context.Context, name string, args ...any) (*sql.Rows, error) {
	st, ctx := t.stmt(ctx, name)
	if st == nil {
		return t.b.tx.QueryContext(ctx, name, args...)
	}
	return st.QueryContext(ctx, args...)
}

// readRow runs the named SELECT on the reader pool for one row.
func (s *Store) readRow(ctx context.Context, name string, args ...any) *sql.Row {
	if st := s.rs[name]; st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return s.r.QueryRowContext(ctx, name, args...)
}

// read runs the named SELECT on the reader pool for its rows.
func (s *Store) read(ctx context.Context, name string, args ...any) (*sql.Rows, error) {
	if st := s.rs[name]; st != nil {
		return st.QueryContext(ctx, args...)
	}
	return s.r.QueryContext(ctx, name, args...)
}

// nowMicros is the store clock in unix µs.
func (s *Store) nowMicros() int64 { return micros(s.now()) }

func newUUIDv7() string {
	u, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return u.String()
}
