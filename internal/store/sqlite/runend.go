package sqlite

// The ends of runs (rule L6: RunFinish and the locks it releases) and the
// sweeper's passes (RULES.md, The sweeper).

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// RunFinish ends run RunID with terminal Status and, in the same
// transaction, clears every lock naming it with one issue.lock_released
// {runId, runStatus} per issue (rule L6), then writes run.finished. An
// agent may finish only its own live run; the board any non-terminal run.
// Errors: 400 invalid_request (status not terminal), 404 not_found, 403
// run_not_owned, 409 run_not_live (terminal, or lost for an agent).
func (s *Store) RunFinish(ctx context.Context, p *store.RunFinishParams) (*clasp.Run, error) {
	if err := store.ValidateRunFinish(p); err != nil {
		return nil, err
	}
	a := p.Actor
	var out *clasp.Run
	err := s.write(ctx, func(tx *wtx) error {
		run, err := store.ScanRun(tx.queryRow(ctx, "RunFinish", sql.Named("run", p.RunID), sql.Named("status", string(p.Status)),
			sql.Named("exit_code", intArg(p.ExitCode)), sql.Named("error", nullString(p.Error)),
			sql.Named("error_code", nullString(p.ErrorCode)),
			sql.Named("board", a.Type != clasp.ActorAgent), sql.Named("agent", a.AgentID), sql.Named("company", a.CompanyID),
			sql.Named("now", tx.now)))
		if errors.Is(err, sql.ErrNoRows) {
			r, err := tx.callerRun(ctx, p.RunID)
			if err != nil {
				return err
			}
			return store.RunRefusal(a, p.RunID, r)
		}
		if err != nil {
			return fmt.Errorf("finish run %s: %w", p.RunID, err)
		}
		out = run
		if err := tx.releaseRunLocks(ctx, run, a); err != nil {
			return err
		}
		return tx.logAll(ctx, a, store.RunFinishedActivity(run))
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// releaseRunLocks is L6 for a run that has just ended: one statement clears
// every lock column naming it, one issue.lock_released per issue.
func (t *wtx) releaseRunLocks(ctx context.Context, run *clasp.Run, a store.Actor) error {
	rows, err := t.query(ctx, "ReleaseRunLocks", sql.Named("run", run.ID), sql.Named("now", t.now))
	if err != nil {
		return fmt.Errorf("release locks of run %s: %w", run.ID, err)
	}
	type released struct{ id, companyID string }
	issues, err := scanRows(rows, func(r *released) []any { return []any{&r.id, &r.companyID} })
	if err != nil {
		return fmt.Errorf("release locks of run %s: %w", run.ID, err)
	}
	for _, r := range issues {
		if err := t.logAll(ctx, a, store.LockReleasedActivity(r.id, r.companyID, run)); err != nil {
			return err
		}
	}
	// The wakes deferred behind this run are promoted in the same
	// transaction (heartbeat.go).
	return t.promoteBlockedBy(ctx, run.ID)
}

// callerRun reads run runID's agent, company and state (statement
// CallerRunRead) to explain a refusal; Found false when it does not exist.
func (t *wtx) callerRun(ctx context.Context, runID string) (store.RunState, error) {
	r := store.RunState{Found: true}
	err := t.queryRow(ctx, "CallerRunRead", sql.Named("run", runID), sql.Named("now", t.now)).Scan(&r.AgentID, &r.CompanyID, &r.State)
	if errors.Is(err, sql.ErrNoRows) {
		return store.RunState{}, nil
	}
	if err != nil {
		return r, fmt.Errorf("read run %s: %w", runID, err)
	}
	return r, nil
}

// SweepExpiredRuns is sweeper pass 1 (statement SweepExpiredRuns):
// running runs whose lease expired become failed with errorCode
// lease_expired, in batches of store.SweepBatch per transaction, one
// run.lost row each (actor system). It returns how many runs it failed.
// Safe to run concurrently.
func (s *Store) SweepExpiredRuns(ctx context.Context) (int, error) {
	return store.Sweep(func() (n, changed int, err error) {
		err = s.write(ctx, func(tx *wtx) error {
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
		return n, n, err
	})
}

// SweepStaleLocks is sweeper pass 2: the locks of issues whose referenced
// runs are all dead (terminal, lost or missing; statement
// StaleLockCandidates, on a reader) are cleared, each by a compare-and-set
// on the old lock values that re-checks deadness (ClearStaleLocks), with
// one issue.stale_lock_cleared each (store.StaleLock.Activity, actor
// system); at most store.SweepBatch issues per transaction. It returns how
// many issues it cleared; a second pass clears nothing, and concurrent
// sweepers clear each issue once.
func (s *Store) SweepStaleLocks(ctx context.Context) (int, error) {
	return store.Sweep(func() (found, cleared int, err error) {
		rows, err := s.read(ctx, "StaleLockCandidates", sql.Named("now", s.nowMicros()), sql.Named("limit", store.SweepBatch))
		if err != nil {
			return 0, 0, fmt.Errorf("find stale locks: %w", err)
		}
		cands, err := scanRows(rows, func(c *store.StaleLock) []any {
			return []any{&c.IssueID, &c.CompanyID, &c.Checkout, &c.Execution, &c.CheckoutState, &c.ExecutionState}
		})
		if err != nil || len(cands) == 0 {
			return 0, 0, wrap(err, "find stale locks")
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
				if err := tx.logAll(ctx, store.SystemActor, c.Activity()); err != nil {
					return err
				}
				cleared++
			}
			return nil
		})
		return len(cands), cleared, err
	})
}
