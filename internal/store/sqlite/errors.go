package sqlite

import (
	"database/sql"
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/clasp-dev/clasp"
)

// translate is the one place where database errors become clasp errors
// (STYLE.md rule 4). A *clasp.Error passes unchanged; sql.ErrNoRows becomes
// 404 not_found; a UNIQUE or PRIMARY KEY violation 409 already_exists; a
// FOREIGN KEY violation 404 not_found (a referenced row is missing);
// SQLITE_BUSY or SQLITE_LOCKED (another process holds the write lock past
// the busy timeout) 503 unavailable. Anything else is returned as it is: an
// internal error, already wrapped with its context.
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
		}
	}
	return err
}

// isUnique reports whether err is a UNIQUE or PRIMARY KEY violation.
func isUnique(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && (se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY)
}

// notFound is a 404 naming the kind of resource and the reference asked for.
func notFound(kind, ref string) *clasp.Error {
	return clasp.Errorf(clasp.CodeNotFound, "No %s %q (or it is not visible to you).", kind, ref)
}

// wrap adds context to an unexpected database error (%w last).
func wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	if e := clasp.AsError(err); e != nil {
		return e
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}
