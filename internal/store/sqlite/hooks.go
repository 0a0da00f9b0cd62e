package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// TestHooks reaches states the store API cannot, with raw writes and no
// activity rows. For tests only (it implements storetest.Hooks); never use
// it in the server.
type TestHooks struct {
	DB *store.DB // the store under test
	S  *Driver   // its driver
}

// NewTestHooks returns the hooks of db, a store on this package's driver.
func NewTestHooks(db *store.DB) *TestHooks { return &TestHooks{DB: db, S: db.Driver().(*Driver)} }

// DeleteRun deletes a run's row, so locks naming it name a missing run (S06).
func (h *TestHooks) DeleteRun(ctx context.Context, runID string) error {
	return h.exec(ctx, "HookDeleteRun", sql.Named("run", runID))
}

// ExpireRunLease sets a run's lease_expires_at one second before the
// store's now, leaving its status as it is (a lost run not yet swept).
func (h *TestHooks) ExpireRunLease(ctx context.Context, runID string) error {
	return h.exec(ctx, "HookSetRunLease", sql.Named("lease", h.S.nowMicros()-1_000_000), sql.Named("run", runID))
}

// SetRunStatus changes a run's status only (finished_at too for a terminal
// status); no lock is released.
func (h *TestHooks) SetRunStatus(ctx context.Context, runID string, status clasp.RunStatus) error {
	var finished any
	if status.Terminal() {
		finished = h.S.nowMicros()
	}
	return h.exec(ctx, "HookSetRunStatus", sql.Named("status", string(status)), sql.Named("finished", finished), sql.Named("run", runID))
}

// HoldCheckouts enters the store's queue of the checkouts of issue
// reference ref in companyID (store.Inflight) as a checkout in flight
// does: agents' checkouts of ref wait until release. waiting is how many
// calls wait in the queue now.
func (h *TestHooks) HoldCheckouts(ctx context.Context, companyID, ref string) (waiting func() int, release func(), err error) {
	done, _, err := h.DB.Checkouts().Enter(ctx, store.CheckoutKey(companyID, ref), "")
	return h.DB.Checkouts().Waiting, done, err
}

// ForceIssueLocks writes an issue's status, assignee and lock columns as
// given (nil clears; the execution name key and time follow the execution
// lock). A state that breaks the L7 CHECK (S22: the two lock columns name
// different runs) is written with CHECK constraints ignored for that one
// statement.
func (h *TestHooks) ForceIssueLocks(ctx context.Context, issueID string, status clasp.IssueStatus, assigneeAgentID, checkoutRunID, executionRunID *string) error {
	args := []any{sql.Named("status", string(status)), sql.Named("assignee", nullString(assigneeAgentID)),
		sql.Named("checkout", nullString(checkoutRunID)), sql.Named("execution", nullString(executionRunID)),
		sql.Named("now", h.S.nowMicros()), sql.Named("id", issueID)}
	err := h.exec(ctx, "HookForceIssueLocks", args...)
	var se *sqlite.Error
	if !errors.As(err, &se) || se.Code() != sqlite3.SQLITE_CONSTRAINT_CHECK {
		return err
	}
	conn, err := h.S.w.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `PRAGMA ignore_check_constraints = ON`); err != nil {
		return err
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `PRAGMA ignore_check_constraints = OFF`)
	_, err = conn.ExecContext(ctx, h.S.sqlText["HookForceIssueLocks"], args...)
	return err
}

// exec runs the named statement on the writer and fails unless it
// changed exactly one row.
func (h *TestHooks) exec(ctx context.Context, name string, args ...any) error {
	res, err := h.S.ws[name].ExecContext(ctx, args...)
	if err != nil {
		return fmt.Errorf("test hook: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("test hook: %d rows changed, want 1: %w", n, sql.ErrNoRows)
	}
	return nil
}
