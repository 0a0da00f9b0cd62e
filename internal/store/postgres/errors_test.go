package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/clasp-dev/clasp"
)

// TestBrokenConnectionIsUnavailable: `clasp verify --db-restart-cmd` found
// that a PostgreSQL restart (-m immediate) under load answered 500 for
// statements whose connection was reset or cut mid-answer ("read: connection
// reset by peer", "unexpected EOF"); they are 503 unavailable, like a
// failed connect. Context cancellation and other errors stay as they are.
func TestBrokenConnectionIsUnavailable(t *testing.T) {
	reset := &net.OpError{Op: "read", Net: "tcp", Err: fmt.Errorf("read: %w", syscall.ECONNRESET)}
	for _, err := range []error{
		fmt.Errorf("authenticate agent key: %w", reset),
		fmt.Errorf("check out issue x: %w", io.ErrUnexpectedEOF),
		fmt.Errorf("get setting board_token_hash: %w", io.EOF),
		fmt.Errorf("renew lease: %w", pgconn.ErrConnClosed),
		fmt.Errorf("write: %w", syscall.EPIPE),
		fmt.Errorf("check out: %w", &pgconn.PgError{Code: "25006"}), // a standby (demoted primary) refuses the write
		fmt.Errorf("check out: %w", &pgconn.PgError{Code: "57P01"}), // admin shutdown: the primary is going away
	} {
		if got := clasp.ErrorCode(translate(err)); got != clasp.CodeUnavailable {
			t.Errorf("translate(%v) has code %q, want %q", err, got, clasp.CodeUnavailable)
		}
		if got := clasp.ErrorCode(wrap(err, "renew lease of run %s", "r1")); got != clasp.CodeUnavailable {
			t.Errorf("wrap(%v) has code %q, want %q", err, got, clasp.CodeUnavailable)
		}
	}
	for _, err := range []error{
		fmt.Errorf("list: %w", context.Canceled),
		errors.New("some bug"),
		&pgconn.PgError{Code: "42P01"},
	} {
		if got := clasp.ErrorCode(translate(err)); got == clasp.CodeUnavailable {
			t.Errorf("translate(%v) is unavailable, want it left as it is", err)
		}
		if got := clasp.ErrorCode(wrap(err, "list")); got == clasp.CodeUnavailable {
			t.Errorf("wrap(%v) is unavailable, want it left as it is", err)
		}
	}
}
