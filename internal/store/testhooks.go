package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/clasp-dev/clasp"
)

// TestHooks reaches states the store API cannot, with raw writes and no
// activity rows (statements Hook* of each dialect's sql/hooks.sql). For
// tests only (it implements storetest.Hooks); never use it in the server.
type TestHooks struct{ db *DB }

// NewTestHooks returns the hooks of db.
func NewTestHooks(db *DB) *TestHooks { return &TestHooks{db: db} }

// HookForcer is implemented by a driver that writes an issue's lock
// columns as a test asks (TestHooks.ForceIssueLocks): statement
// HookForceIssueLocks with args, also when the state breaks the L7 CHECK
// (each dialect lifts the CHECK its own way); an error unless it changed
// exactly one row.
type HookForcer interface {
	HookForceIssueLocks(ctx context.Context, args Args) error
}

// DeleteRun deletes a run's row, so locks naming it name a missing run (S06).
func (h *TestHooks) DeleteRun(ctx context.Context, runID string) error {
	return h.exec(ctx, "HookDeleteRun", Args{"run": runID})
}

// ExpireRunLease sets a run's lease_expires_at one second before the
// store's now, leaving its status as it is (a lost run not yet swept).
func (h *TestHooks) ExpireRunLease(ctx context.Context, runID string) error {
	return h.exec(ctx, "HookSetRunLease", Args{"run": runID})
}

// SetRunStatus changes a run's status only (finished_at too for a terminal
// status); no lock is released.
func (h *TestHooks) SetRunStatus(ctx context.Context, runID string, status clasp.RunStatus) error {
	return h.exec(ctx, "HookSetRunStatus", Args{"status": string(status), "terminal": status.Terminal(), "run": runID})
}

// HoldCheckouts enters the store's queue of the checkouts of issue
// reference ref in companyID (Inflight) as a checkout in flight does:
// agents' checkouts of ref wait until release. waiting is how many calls
// wait in the queue now.
func (h *TestHooks) HoldCheckouts(ctx context.Context, companyID, ref string) (waiting func() int, release func(), err error) {
	done, _, err := h.db.Checkouts().Enter(ctx, CheckoutKey(companyID, ref), "")
	return h.db.Checkouts().Waiting, done, err
}

// HoldClaims enters the store's queue of the claims of unassigned issues
// with statuses unassigned in companyID as a claim in flight does
// (Claims.Hold): such claims wait until release, which runs them as
// batches. Error: the queue is in use already.
func (h *TestHooks) HoldClaims(companyID string, unassigned []string) (waiting func() int, release func(), err error) {
	return h.db.Hold(companyID, unassigned)
}

// ForceIssueLocks writes an issue's status, assignee and lock columns as
// given (nil clears; the execution name key and time follow the execution
// lock), even a state that breaks the L7 CHECK (S22: the two lock columns
// name different runs), through the driver's HookForcer.
func (h *TestHooks) ForceIssueLocks(ctx context.Context, issueID string, status clasp.IssueStatus, assigneeAgentID, checkoutRunID, executionRunID *string) error {
	f, ok := h.db.d.(HookForcer)
	if !ok {
		return fmt.Errorf("test hook: driver %T cannot force lock columns", h.db.d)
	}
	return f.HookForceIssueLocks(ctx, Args{"status": string(status), "assignee": assigneeAgentID,
		"checkout": checkoutRunID, "execution": executionRunID, "id": issueID})
}

// errHookRows is the error of a hook statement that changed no row or
// several.
var errHookRows = errors.New("test hook: want exactly one row changed")

// exec runs the named statement in a write and fails unless it changed
// exactly one row.
func (h *TestHooks) exec(ctx context.Context, name string, args Args) error {
	return h.db.d.Write(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, name, args)
		if err != nil {
			return fmt.Errorf("test hook %s: %w", name, err)
		}
		if n != 1 {
			return fmt.Errorf("%w: %s changed %d", errHookRows, name, n)
		}
		return nil
	})
}
