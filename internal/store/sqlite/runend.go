package sqlite

// The ends of runs (rule L6: RunFinish and the locks it releases) and the
// sweeper's passes (RULES.md, The sweeper): the store.Driver methods,
// each one write transaction. SQLite's statements write one table each, so
// each rule's activity rows are written by a statement of their own that
// follows it in the same transaction (sql/lock.sql).

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// releaseRunLocks is L6 for a run that has just ended with status:
// statement ReleaseRunLocks clears every lock naming it, then
// LockReleasedActivity writes one issue.lock_released per issue it
// released, as actor a's.
func (t *wtx) releaseRunLocks(ctx context.Context, run *clasp.Run, status clasp.RunStatus, a store.Actor) error {
	rows, err := t.query(ctx, "ReleaseRunLocks", sql.Named("run", run.ID), sql.Named("now", t.now))
	if err != nil {
		return fmt.Errorf("release locks of run %s: %w", run.ID, err)
	}
	ids, err := scanRows(rows, func(id *string) []any { return []any{id} })
	if err != nil {
		return fmt.Errorf("release locks of run %s: %w", run.ID, err)
	}
	if len(ids) > 0 {
		if err := t.logRule(ctx, "LockReleasedActivity", a,
			store.Args{"run": run.ID, "run_status": string(status), "issues": ids}); err != nil {
			return err
		}
	}
	return nil
}

// runFinished writes run.finished for run runID, which has just ended, as
// actor a's (statement RunFinishedActivity, L6).
func (t *wtx) runFinished(ctx context.Context, runID string, a store.Actor) error {
	return t.logRule(ctx, "RunFinishedActivity", a, store.Args{"run": runID})
}

// RunSweepExpired is store.Driver.RunSweepExpired: statement
// SweepExpiredRuns (its outer WHERE re-checks status and lease, so a
// renewal that commits first wins), then one run.lost per run it failed,
// in one write transaction.
func (d *Driver) RunSweepExpired(ctx context.Context) (int, error) {
	n := 0
	err := d.write(ctx, func(tx *wtx) error {
		rows, err := tx.query(ctx, "SweepExpiredRuns", sql.Named("now", tx.now), sql.Named("limit", store.SweepBatch))
		if err != nil {
			return fmt.Errorf("sweep expired runs: %w", err)
		}
		type lost struct {
			id, companyID, agentID string
			lease                  int64
		}
		runs, err := scanRows(rows, func(r *lost) []any { return []any{&r.id, &r.companyID, &r.agentID, &r.lease} })
		if err != nil {
			return fmt.Errorf("sweep expired runs: %w", err)
		}
		for _, r := range runs {
			if err := tx.logActivity(ctx, r.companyID, store.SystemActor, clasp.ActionRunLost, "run", r.id, map[string]any{
				"agentId": r.agentID, "errorCode": clasp.RunErrorLeaseExpired, "leaseExpiresAt": fromMicros(r.lease),
			}); err != nil {
				return err
			}
		}
		n = len(runs)
		return nil
	})
	return n, err
}

// IssueClearStaleLocks is store.Driver.IssueClearStaleLocks: the
// candidates and the states of their runs are read on a reader (statement
// StaleLockCandidates), then each is cleared in one write transaction by
// a compare-and-set on its old lock values that re-checks deadness
// (ClearStaleLocks), one issue.stale_lock_cleared per issue cleared
// (statement StaleLockActivity); one a checkout or another sweeper
// changed first is left alone.
func (d *Driver) IssueClearStaleLocks(ctx context.Context) (found, cleared int, err error) {
	s := d
	rows, err := s.read(ctx, "StaleLockCandidates", sql.Named("now", s.nowMicros()), sql.Named("limit", store.SweepBatch))
	if err != nil {
		return 0, 0, translate(fmt.Errorf("find stale locks: %w", err))
	}
	// each candidate: its issue, lock columns and the states of their runs
	cands, err := scanRows(rows, func(c *store.LockState) []any {
		return []any{&c.IssueID, &c.CompanyID, &c.Checkout, &c.Execution, &c.CheckoutState, &c.ExecutionState}
	})
	if err != nil || len(cands) == 0 {
		return 0, 0, translate(wrap(err, "find stale locks"))
	}
	err = s.write(ctx, func(tx *wtx) error {
		cleared = 0
		for _, c := range cands {
			res, err := tx.exec(ctx, "ClearStaleLocks", sql.Named("id", c.IssueID), sql.Named("old_checkout", store.OrNil(c.Checkout)),
				sql.Named("old_execution", store.OrNil(c.Execution)), sql.Named("now", tx.now))
			if err != nil {
				return fmt.Errorf("clear stale lock of issue %s: %w", c.IssueID, err)
			}
			if k, _ := res.RowsAffected(); k == 0 {
				continue // changed since it was read: a checkout or another sweeper came first
			}
			if err := tx.logRule(ctx, "StaleLockActivity", store.SystemActor, oldLockArgs(store.Args{}, c.IssueID, &c)); err != nil {
				return err
			}
			cleared++
		}
		return nil
	})
	return len(cands), cleared, err
}
