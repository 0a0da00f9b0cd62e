package sqlite

import (
	"database/sql"
	"errors"
	"sync/atomic"
	"syscall"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// translate is the one place where database errors become clasp errors
// (STYLE.md rule 4). A *clasp.Error passes unchanged; sql.ErrNoRows becomes
// 404 not_found; a UNIQUE or PRIMARY KEY violation 409 already_exists; a
// FOREIGN KEY violation 404 not_found (a referenced row is missing);
// SQLITE_BUSY or SQLITE_LOCKED (another process holds the write lock past
// the busy timeout) 503 unavailable; SQLITE_FULL or ENOSPC (the disk under
// the database is full: the write was rolled back whole) 503 unavailable
// with details.reason "disk_full" (ErrDiskFull). Anything else is returned
// as it is: an internal error, already wrapped with its context.
func translate(err error) error {
	if err == nil {
		return nil
	}
	if e := clasp.AsError(err); e != nil {
		return e
	}
	if errors.Is(err, sql.ErrNoRows) {
		return clasp.Errorf(clasp.CodeNotFound, "Not found.")
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return clasp.Errorf(clasp.CodeAlreadyExists, "A resource with this unique value already exists.")
		case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
			return clasp.Errorf(clasp.CodeNotFound, "A referenced resource does not exist.")
		}
		switch se.Code() & 0xff { // primary result code
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return clasp.Errorf(clasp.CodeUnavailable, "The database is busy; retry shortly.")
		case sqlite3.SQLITE_FULL:
			return diskFull()
		}
	}
	if errors.Is(err, syscall.ENOSPC) {
		return diskFull()
	}
	return err
}

// ReasonDiskFull is details.reason of the 503 unavailable a write gets
// when the disk under the database is full.
const ReasonDiskFull = "disk_full"

// diskFull is the 503 a write gets while the disk under the database is
// full: SQLite rolled the write back whole (nothing of it was stored, no
// lock half-taken), reads still work, and the same writer connection
// commits again as soon as space is freed, with no restart.
func diskFull() *clasp.Error {
	return clasp.Errorf(clasp.CodeUnavailable, "The disk holding the database is full, so this write was not made "+
		"(nothing of it was stored). Reads still work. Free space on the disk of the server's data directory; "+
		"writes resume by themselves, then retry.").WithDetails("reason", ReasonDiskFull)
}

// isUnique reports whether err is a UNIQUE or PRIMARY KEY violation.
func isUnique(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && (se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY)
}

// notFound is store.ErrNotFound.
func notFound(kind, ref string) *clasp.Error { return store.ErrNotFound(kind, ref) }

// wrap is store.Wrap.
func wrap(err error, format string, args ...any) error { return store.Wrap(err, format, args...) }

// diskFullLog is the state behind noteDiskFull.
type diskFullLog struct {
	full     atomic.Bool
	loggedAt atomic.Int64 // unix ns of the last "disk full" log line
}

// noteDiskFull logs, for the operator, when writes start meeting a full
// disk (an error line, repeated at most once a minute while it lasts) and
// when a write is committed again afterwards (an info line). It looks at a
// batch's answers once the batch is done.
func (s *Driver) noteDiskFull(batch []*writeReq) {
	full, committed := false, false
	for _, r := range batch {
		switch {
		case r.err == nil && !r.panicked:
			committed = true
		case clasp.ErrorCode(r.err) == clasp.CodeUnavailable && clasp.AsError(r.err).Details["reason"] == ReasonDiskFull:
			full = true
		}
	}
	d := &s.diskFull
	now := time.Now().UnixNano()
	switch {
	case full:
		if !d.full.Swap(true) || now-d.loggedAt.Load() >= int64(time.Minute) {
			d.loggedAt.Store(now)
			s.log.Error("the disk under the database is full: writes are refused (503 unavailable, reason disk_full) and reads go on; free space there and writes resume by themselves", "path", s.path)
		}
	case committed && d.full.Swap(false):
		s.log.Info("writes are committed again: the disk under the database has room", "path", s.path)
	}
}
