package postgres

// The ends of runs (rule L6: RunFinish and the locks it releases) and the
// sweeper's passes (RULES.md, The sweeper).

import (
	"context"
	"errors"
	"fmt"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
	"github.com/jackc/pgx/v5"
)

// RunFinish ends run RunID with terminal Status (statement RunFinish) and,
// in the same transaction, clears every lock naming it with one
// issue.lock_released {runId, runStatus} per issue (rule L6, statement
// ReleaseRunLocks), then writes run.finished. An agent may finish only its
// own live run; the board any non-terminal run. Errors: those of
// store.ValidateRunFinish and store.RunRefusal.
func (s *Store) RunFinish(ctx context.Context, p *store.RunFinishParams) (*clasp.Run, error) {
	if err := store.ValidateRunFinish(p); err != nil {
		return nil, err
	}
	a := p.Actor
	var exitCode *int32
	if p.ExitCode != nil {
		v := int32(*p.ExitCode) // #nosec G115 -- ValidateRunFinish bounds it to 32 bits
		exitCode = &v
	}
	args := actorArgs(namedArgs{"run": p.RunID, "status": string(p.Status), "exit_code": exitCode, "error": p.Error, "error_code": p.ErrorCode,
		"board": a.Type != clasp.ActorAgent, "agent": a.AgentID, "company": a.CompanyID}, a)
	var out *clasp.Run
	err := s.tx(ctx, func(tx pgx.Tx) error {
		run, err := store.ScanRun(tx.QueryRow(ctx, q("RunFinish"), args))
		if errors.Is(err, pgx.ErrNoRows) {
			r, err := callerRun(ctx, tx, p.RunID)
			if err != nil {
				return err
			}
			return store.RunRefusal(p.Actor, p.RunID, r)
		}
		if err != nil {
			return fmt.Errorf("finish run %s: %w", p.RunID, err)
		}
		out = run
		return s.releaseRunLocks(ctx, tx, a, p.Status, []*clasp.Run{run})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// callerRun reads run runID's agent, company and state (statement
// CallerRunRead) to explain a refusal; Found false when it does not exist.
func callerRun(ctx context.Context, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, runID string) (store.RunState, error) {
	r := store.RunState{Found: true}
	err := db.QueryRow(ctx, q("CallerRunRead"), namedArgs{"run": runID}).Scan(&r.AgentID, &r.CompanyID, &r.State)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.RunState{}, nil
	}
	return r, wrap(err, "read run %s", runID)
}

// releaseRunLocks is L6 for runs this transaction has just ended with
// status (statement ReleaseRunLocks): every lock naming them is cleared,
// one issue.lock_released per issue, then one run.finished {status,
// exitCode, error, and errorCode when set} per run; then the wakes
// deferred behind those runs are promoted (heartbeat.go).
func (s *Store) releaseRunLocks(ctx context.Context, tx pgx.Tx, a store.Actor, status clasp.RunStatus, runs []*clasp.Run) error {
	type finished struct {
		ID        string `json:"id"`
		CompanyID string `json:"company_id"`
		Details   any    `json:"details"`
	}
	ids := make([]string, len(runs))
	fin := make([]finished, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
		fin[i] = finished{r.ID, r.CompanyID, store.RunFinishedActivity(r).Details}
	}
	finJSON, err := jsonArg(fin)
	if err != nil {
		return err
	}
	args := actorArgs(namedArgs{"runs": ids, "status": string(status), "finished": finJSON}, a)
	var n int64
	if err := tx.QueryRow(ctx, q("ReleaseRunLocks"), args).Scan(&n); err != nil {
		return wrap(err, "release locks of runs %v", ids)
	}
	// The wakes deferred behind those runs are promoted in the same
	// transaction (store.PromoteBlockedBy).
	_, err = store.PromoteBlockedBy(ctx, s.hbTx(tx), ids)
	return err
}

// SweepExpiredRuns is sweeper pass 1 (statement SweepExpiredRuns): running
// runs whose lease expired (by the database clock) become failed with
// errorCode lease_expired, store.SweepBatch per statement, one run.lost
// row each (actor system). It returns how many runs it failed. Safe to run
// concurrently on any number of replicas: each run is failed once.
func (s *Store) SweepExpiredRuns(ctx context.Context) (int, error) {
	return store.Sweep(func() (n, changed int, err error) {
		err = s.retry(ctx, func() error {
			return wrap(s.pool.QueryRow(ctx, q("SweepExpiredRuns"), namedArgs{"limit": store.SweepBatch}).Scan(&n), "sweep expired runs")
		})
		return n, n, err
	})
}

// SweepStaleLocks is sweeper pass 2: the locks of issues whose referenced
// runs are all dead (terminal, lost or missing) are cleared, with one
// issue.stale_lock_cleared {clearedCheckoutRunId, clearedExecutionRunId,
// why} each (actor system), at most store.SweepBatch issues per
// transaction. Each transaction locks its candidates FOR UPDATE in id
// order (statement StaleLockCandidates, waiting for a concurrent sweeper's
// batch), then re-checks and clears them with a snapshot taken after the
// lock (ClearStaleLocks), so concurrent sweepers (on any number of
// replicas) clear each issue once and never an issue a checkout has just
// taken over. It returns how many issues it cleared; a second pass clears
// nothing.
func (s *Store) SweepStaleLocks(ctx context.Context) (int, error) {
	return store.Sweep(func() (locked, cleared int, err error) {
		err = s.tx(ctx, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, q("StaleLockCandidates"), namedArgs{"limit": store.SweepBatch})
			if err != nil {
				return fmt.Errorf("find stale locks: %w", err)
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return fmt.Errorf("find stale locks: %w", err)
			}
			locked, cleared = len(ids), 0
			if len(ids) == 0 {
				return nil
			}
			err = tx.QueryRow(ctx, q("ClearStaleLocks"), namedArgs{"ids": ids}).Scan(&cleared)
			return wrap(err, "clear stale locks")
		})
		return locked, cleared, err
	})
}
