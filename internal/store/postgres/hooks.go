package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
	return h.exec(ctx, "HookDeleteRun", namedArgs{"run": runID})
}

// ExpireRunLease sets a run's lease_expires_at one second before the
// database's now(), leaving its status as it is (a lost run not yet swept).
func (h *TestHooks) ExpireRunLease(ctx context.Context, runID string) error {
	return h.exec(ctx, "HookSetRunLease", namedArgs{"run": runID})
}

// SetRunStatus changes a run's status only (finished_at too for a terminal
// status); no lock is released.
func (h *TestHooks) SetRunStatus(ctx context.Context, runID string, status clasp.RunStatus) error {
	return h.exec(ctx, "HookSetRunStatus", namedArgs{"status": string(status), "terminal": status.Terminal(), "run": runID})
}

// HoldCheckouts enters the store's queue of the checkouts of issue
// reference ref in companyID (store.Inflight) as a checkout in flight
// does: agents' checkouts of ref wait until release. waiting is how many
// calls wait in the queue now.
func (h *TestHooks) HoldCheckouts(ctx context.Context, companyID, ref string) (waiting func() int, release func(), err error) {
	done, _, err := h.DB.Checkouts().Enter(ctx, store.CheckoutKey(companyID, ref), "")
	return h.DB.Checkouts().Waiting, done, err
}

// HoldClaims enters the store's queue of the claims of unassigned issues
// with statuses unassigned in companyID as a claim in flight does
// (store.Claims.Hold): such claims wait until release, which runs them as
// batches. waiting is how many calls wait in the queue now. Error: the
// queue is in use already.
func (h *TestHooks) HoldClaims(companyID string, unassigned []string) (waiting func() int, release func(), err error) {
	return h.DB.Hold(companyID, unassigned)
}

// ForceIssueLocks writes an issue's status, assignee and lock columns as
// given (nil clears; the execution name key and time follow the execution
// lock). A state that breaks the L7 CHECK (S22: the two lock columns name
// different runs) is written in a transaction that drops the CHECK, writes,
// and adds it back NOT VALID (checked for every later write, not for the
// rows already there): fine for a test's own schema, never for a shared one.
func (h *TestHooks) ForceIssueLocks(ctx context.Context, issueID string, status clasp.IssueStatus, assigneeAgentID, checkoutRunID, executionRunID *string) error {
	args := namedArgs{"status": string(status), "assignee": assigneeAgentID, "checkout": checkoutRunID,
		"execution": executionRunID, "id": issueID}
	err := h.exec(ctx, "HookForceIssueLocks", args)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "23514" {
		return err
	}
	return pgx.BeginFunc(ctx, h.S.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, q("HookDropL7")); err != nil {
			return fmt.Errorf("test hook: %w", err)
		}
		tag, err := tx.Exec(ctx, q("HookForceIssueLocks"), args)
		if err != nil {
			return fmt.Errorf("test hook: %w", err)
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("test hook: %d rows changed, want 1: %w", tag.RowsAffected(), pgx.ErrNoRows)
		}
		_, err = tx.Exec(ctx, q("HookAddL7"))
		return err
	})
}

// exec runs the named statement and fails unless it changed exactly one row.
func (h *TestHooks) exec(ctx context.Context, name string, args namedArgs) error {
	tag, err := h.S.pool.Exec(ctx, q(name), args)
	if err != nil {
		return fmt.Errorf("test hook: %w", err)
	}
	if n := tag.RowsAffected(); n != 1 {
		return fmt.Errorf("test hook: %d rows changed, want 1: %w", n, pgx.ErrNoRows)
	}
	return nil
}
