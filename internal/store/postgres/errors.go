package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// translate is the one place where database errors become clasp errors
// (STYLE.md rule 4). A *clasp.Error passes unchanged; pgx.ErrNoRows becomes
// 404 not_found; a unique violation (23505) 409 already_exists; a foreign
// key violation (23503) 404 not_found (a referenced row is missing), as in
// the SQLite store; a failed connection, too many connections (53300) or a
// server shutting down (57P01, 57P03) or a connection that broke under a
// statement (brokenConnection) 503 unavailable. Anything else
// (including a deadlock still failing after the retries, and context
// cancellation) is returned as it is: an internal error, already wrapped
// with its context.
func translate(err error) error {
	if err == nil {
		return nil
	}
	if e := clasp.AsError(err); e != nil {
		return e
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return clasp.Errorf(clasp.CodeNotFound, "Not found.")
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "23505":
			if pe.TableName == "idempotency_keys" {
				return err // a concurrent duplicate request: the caller replays (store.idempotent)
			}
			return clasp.Errorf(clasp.CodeAlreadyExists, "A resource with this unique value already exists.")
		case "23503":
			return clasp.Errorf(clasp.CodeNotFound, "A referenced resource does not exist.")
		}
	}
	if u := unavailable(err); u != nil {
		return u
	}
	return err
}

// IsUnavailable reports whether err (from Open or any store method) means
// the database is unreachable or not accepting writes right now (see
// unavailable), so that trying again later may succeed: a failed connect,
// every host of a multi-host URL refused or read-only, a server starting
// up or shutting down. A bad URL, bad credentials or a failed migration
// are not.
func IsUnavailable(err error) bool { return unavailable(err) != nil }

// unavailable returns the 503 unavailable error for err when the database
// is unreachable or went away (too many connections 53300, shutdown
// 57P01-57P03, a failed connect, a connection broken under a statement),
// its disk is full (53100, details.reason ReasonDiskFull), or it is a
// standby that refuses writes (25006 read_only_sql_transaction: a
// connection opened to a primary since demoted, or a URL without
// target_session_attrs=read-write naming a standby first), or a statement
// ran past the statement timeout (57014), or nil. A full pg_wal is not
// 53100: PostgreSQL stops with a PANIC and restarts, so the requests in
// flight see a broken connection and later ones a failed connect, both 503
// too.
func unavailable(err error) *clasp.Error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil // the caller went away or ran out of time: not the database's doing
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "53300", "57P01", "57P02", "57P03":
			return clasp.Errorf(clasp.CodeUnavailable, "The database is unavailable; retry shortly.")
		case "53100": // disk_full: the statement failed and its transaction is rolled back
			return clasp.Errorf(clasp.CodeUnavailable, "The database server's disk is full, so this write was not made "+
				"(nothing of it was stored). Free space on the PostgreSQL server's disk (its data directory or pg_wal; "+
				"PostgreSQL stops itself when pg_wal is full and must then be started again); clasp reconnects "+
				"by itself, then retry.").WithDetails("reason", ReasonDiskFull)
		case "57014":
			return clasp.Errorf(clasp.CodeUnavailable, "The database did not finish the request within the server's statement timeout; it may or may not have taken effect; retry shortly.")
		case "25006":
			return clasp.Errorf(clasp.CodeUnavailable, "The database server is a read-only standby (a failover may be under way); retry shortly.")
		}
		return nil
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return clasp.Errorf(clasp.CodeUnavailable, "The database is unreachable; retry shortly.")
	}
	if brokenConnection(err) {
		return clasp.Errorf(clasp.CodeUnavailable, "The database connection broke during the request, which may or may not have "+
			"taken effect; retry shortly (a retry of checkout or release by the same run is safe).")
	}
	return nil
}

// ReasonDiskFull is details.reason of the 503 unavailable a write gets
// when the database server's disk is full (SQLSTATE 53100).
const ReasonDiskFull = "disk_full"

// brokenConnection reports whether err is a database connection that broke
// under a statement: reset or closed by the server (a restart, a
// pg_terminate_backend whose FATAL never arrived), or cut mid-answer. Found by
// `clasp verify --db-restart-cmd`: a restart with -m immediate made
// these 500s.
func brokenConnection(err error) bool {
	for _, target := range []error{pgconn.ErrConnClosed, io.ErrUnexpectedEOF, io.EOF, net.ErrClosed,
		syscall.ECONNRESET, syscall.EPIPE, syscall.ECONNABORTED, syscall.ECONNREFUSED} {
		if errors.Is(err, target) {
			return true
		}
	}
	var oe *net.OpError
	return errors.As(err, &oe)
}

// isUnique reports whether err is a unique violation (23505).
func isUnique(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// notFound is store.ErrNotFound.
func notFound(kind, ref string) *clasp.Error { return store.ErrNotFound(kind, ref) }

// wrap is store.Wrap, except that a database that went away under the
// statement is 503 unavailable (unavailable), not a 500.
func wrap(err error, format string, args ...any) error {
	if clasp.AsError(err) == nil {
		if u := unavailable(err); u != nil {
			return u
		}
	}
	return store.Wrap(err, format, args...)
}
