// Package dbfile works on clasp's SQLite database files as files: a
// consistent copy while a server writes (Snapshot), the checks a copy
// passes before it is restored (Inspect), and leaving WAL mode so that the
// file alone holds every committed write (Detach). The store itself is
// internal/store/sqlite's; nothing here opens it.
package dbfile

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"

	sqlitedb "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/clasp-dev/clasp/internal/store"
	"github.com/clasp-dev/clasp/internal/store/sqlite"
)

// Snapshot writes a consistent copy of the clasp database at src to the new
// file dst with VACUUM INTO, while other processes (a running clasp serve)
// go on reading and writing src: the copy is the state of one read
// transaction, every write committed before it began and none after, in a
// compacted file, mode 0600. dst must not exist. src is opened without migrating it
// (a database of an older schema is copied as it is) and only read. The
// copy is in rollback-journal mode (no -wal file beside it) and synced to
// disk. It returns the schema version of the copy; errors: src missing or
// not a clasp database, dst existing, the disk under dst full (the error
// wraps ENOSPC or says SQLITE_FULL), ctx ending (the statement is
// interrupted). On error dst may be left half-written: the caller removes
// it.
func Snapshot(ctx context.Context, src, dst string) (int64, error) {
	if _, err := os.Stat(src); err != nil {
		return 0, fmt.Errorf("snapshot: database %s: %w", src, err)
	}
	// The copy holds every issue, comment and key hash: it is created
	// empty with mode 0600 (as private as the database) before VACUUM INTO
	// fills it, which it does to an empty file, so it is never readable by
	// others, whatever the umask.
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600) // #nosec G304 -- the backup file the user names
	if errors.Is(err, fs.ErrExist) {
		return 0, fmt.Errorf("snapshot: %s already exists", dst)
	}
	if err != nil {
		return 0, fmt.Errorf("snapshot: %w", err)
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("snapshot: %w", err)
	}
	db, err := sql.Open("sqlite", src+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return 0, fmt.Errorf("snapshot: open %s: %w", src, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	v, err := schemaVersion(ctx, db)
	if err != nil {
		return 0, fmt.Errorf("snapshot: %s: %w", src, err)
	}
	if _, err := db.ExecContext(ctx, "VACUUM INTO ?", dst); err != nil {
		return 0, fmt.Errorf("snapshot: VACUUM INTO %s: %w", dst, err)
	}
	if err := db.Close(); err != nil {
		return 0, fmt.Errorf("snapshot: close %s: %w", src, err)
	}
	// VACUUM INTO does not sync its output, and keeps the source's WAL
	// flag in the header: make the copy one self-contained file on disk.
	out, err := sql.Open("sqlite", dst+"?_pragma=journal_mode(DELETE)&_pragma=synchronous(FULL)")
	if err != nil {
		return 0, fmt.Errorf("snapshot: open %s: %w", dst, err)
	}
	if err := out.PingContext(ctx); err != nil {
		_ = out.Close() // the ping error is the one returned
		return 0, fmt.Errorf("snapshot: %s: %w", dst, err)
	}
	if err := out.Close(); err != nil {
		return 0, fmt.Errorf("snapshot: close %s: %w", dst, err)
	}
	if err := SyncFile(dst); err != nil {
		return 0, fmt.Errorf("snapshot: %w", err)
	}
	return v, nil
}

// Inspection is what Inspect found in a database file.
type Inspection struct {
	SchemaVersion int64 // newest migration applied (goose_db_version)
	Companies     int64
	Issues        int64
	Activity      int64 // activity rows
	Locked        int64 // issues with a checkout lock
}

// ErrNewerSchema is wrapped by Inspect's error for a database whose schema
// version is above LatestSchemaVersion.
var ErrNewerSchema = store.ErrNewerSchema

// Inspect checks the clasp database file at path before it is restored:
// PRAGMA integrity_check must answer ok and PRAGMA foreign_key_check
// nothing; it must have clasp's schema (goose_db_version and the issues
// table) at a version this binary knows (at most LatestSchemaVersion; an
// older one is migrated by the next Open); and every issue must satisfy
// invariant L7 (a checkout lock implies status in_progress and an
// execution lock naming the same run). It switches the file to
// rollback-journal mode (so it is one self-contained file) and otherwise
// only reads it; pass a private copy, never a database a server has open.
// Errors say which check failed (ErrNewerSchema for a newer schema).
func Inspect(ctx context.Context, path string) (Inspection, error) {
	var in Inspection
	if st, err := os.Stat(path); err != nil {
		return in, err
	} else if !st.Mode().IsRegular() {
		return in, fmt.Errorf("%s is not a regular file", path)
	}
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(DELETE)")
	if err != nil {
		return in, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if err := db.PingContext(ctx); err != nil {
		return in, fmt.Errorf("not a readable SQLite database: %w", err)
	}
	rows, err := db.QueryContext(ctx, "PRAGMA integrity_check(20)")
	if err != nil {
		return in, fmt.Errorf("integrity check: %w", err)
	}
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			_ = rows.Close() // the scan error is the one returned
			return in, fmt.Errorf("integrity check: %w", err)
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return in, fmt.Errorf("integrity check: %w", err)
	}
	if len(problems) > 0 {
		// integrity_check checks the CHECK constraints too: name L7's.
		if n, err := brokenL7(ctx, db); err == nil && n > 0 {
			return in, errL7(n)
		}
		return in, fmt.Errorf("integrity check failed (the file is damaged): %s", strings.Join(problems, "; "))
	}
	if in.SchemaVersion, err = schemaVersion(ctx, db); err != nil {
		return in, err
	}
	if latest := sqlite.LatestSchemaVersion(); in.SchemaVersion > latest {
		return in, fmt.Errorf("%w: its schema version is %d, this clasp knows versions up to %d; restore it with that newer clasp", ErrNewerSchema, in.SchemaVersion, latest)
	}
	var fk int64
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM pragma_foreign_key_check").Scan(&fk); err != nil {
		return in, fmt.Errorf("foreign key check: %w", err)
	}
	if fk > 0 {
		return in, fmt.Errorf("foreign key check failed: %d rows reference missing rows", fk)
	}
	broken, err := brokenL7(ctx, db)
	if err != nil {
		return in, err
	}
	if broken > 0 {
		return in, errL7(broken)
	}
	err = db.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM companies), (SELECT count(*) FROM issues), (SELECT count(*) FROM activity),
		(SELECT count(*) FROM issues WHERE checkout_run_id IS NOT NULL)`).
		Scan(&in.Companies, &in.Issues, &in.Activity, &in.Locked)
	if err != nil {
		return in, fmt.Errorf("count rows: %w", err)
	}
	return in, nil
}

// brokenL7 counts the issues that break invariant L7 (RULES.md): a
// checkout lock without status in_progress and an execution lock of the
// same run.
func brokenL7(ctx context.Context, db *sql.DB) (int64, error) {
	var n int64
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM issues WHERE checkout_run_id IS NOT NULL
		AND NOT (status = 'in_progress' AND execution_run_id IS checkout_run_id)`).Scan(&n); err != nil {
		return 0, fmt.Errorf("lock check: %w", err)
	}
	return n, nil
}

func errL7(n int64) error {
	return fmt.Errorf("lock check failed: %d issues have a checkout lock without status in_progress and an execution lock of the same run (invariant L7)", n)
}

// schemaVersion reads the newest applied migration of a clasp database
// without migrating it.
func schemaVersion(ctx context.Context, db *sql.DB) (int64, error) {
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN ('goose_db_version', 'issues')`).Scan(&n); err != nil {
		return 0, fmt.Errorf("not a readable SQLite database: %w", err)
	}
	if n != 2 {
		return 0, errors.New("not a clasp database (no goose_db_version or issues table)")
	}
	var v int64
	if err := db.QueryRowContext(ctx, `SELECT coalesce(max(version_id), 0) FROM goose_db_version WHERE is_applied`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// SyncFile fsyncs the file at path, so that what was written to it is on
// disk; errors: the file cannot be opened, synced or closed.
func SyncFile(path string) error {
	f, err := os.Open(path) // #nosec G304 -- a file the caller names
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close() // the sync error is the one returned
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return f.Close()
}

// ErrInUse is wrapped by Detach's error when another connection (a running
// server, a backup, a sqlite3 shell) has the database open.
var ErrInUse = errors.New("another process has the database open")

// Detach folds the WAL of the database at path into the file and switches
// it to rollback-journal mode, so that the file alone holds every
// committed write and can be moved (restore keeps the replaced database
// this way). Leaving WAL mode needs every other connection closed: while
// one is open it fails at once with an error wrapping ErrInUse. Other
// errors (a damaged file) are returned as they are.
func Detach(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(0)")
	if err != nil {
		return err
	}
	defer db.Close()
	var mode string
	err = db.QueryRowContext(ctx, "PRAGMA journal_mode=DELETE").Scan(&mode)
	var se *sqlitedb.Error
	if errors.As(err, &se) && (se.Code()&0xff == sqlite3.SQLITE_BUSY || se.Code()&0xff == sqlite3.SQLITE_LOCKED) {
		return fmt.Errorf("%w (%s): stop it first: %v", ErrInUse, path, err)
	}
	if err != nil {
		return fmt.Errorf("leave WAL mode on %s: %w", path, err)
	}
	if mode != "delete" {
		return fmt.Errorf("%w (%s): it stayed in journal mode %q", ErrInUse, path, mode)
	}
	return db.Close()
}

// IsDiskFull reports whether err is SQLite's SQLITE_FULL or wraps ENOSPC:
// the disk under the file being written is full.
func IsDiskFull(err error) bool {
	var se *sqlitedb.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_FULL {
		return true
	}
	return errors.Is(err, syscall.ENOSPC)
}
