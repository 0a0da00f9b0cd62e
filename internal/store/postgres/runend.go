package postgres

// The ends of runs (rule L6: RunFinish and the locks it releases) and the
// sweeper's passes (RULES.md, The sweeper): the store.Driver methods,
// each one transaction. PostgreSQL's statements write their own activity
// rows.

import (
	"context"
	"errors"
	"fmt"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
	"github.com/jackc/pgx/v5"
)

// RunFinish is store.Driver.RunFinish: statement RunFinish, then
// releaseRunLocks (L6 and run.finished, then the deferred wakes promoted),
// in one transaction.
func (d *Driver) RunFinish(ctx context.Context, p *store.RunFinishParams) (*clasp.Run, error) {
	args := store.RunFinishArgs(p)
	var out *clasp.Run
	err := d.tx(ctx, func(tx pgx.Tx) error {
		run, err := store.ScanRun(pooled{tx}.QueryRow(ctx, "RunFinish", args))
		if errors.Is(err, pgx.ErrNoRows) {
			return errNotFinished // nothing written: no wake of the activity streams
		}
		if err != nil {
			return fmt.Errorf("finish run %s: %w", p.RunID, err)
		}
		if err := d.releaseRunLocks(ctx, tx, p.Actor, p.Status, []*clasp.Run{run}); err != nil {
			return err
		}
		out = run
		return nil
	})
	if err != nil {
		if errors.Is(err, errNotFinished) {
			return nil, nil
		}
		return nil, err
	}
	return out, nil
}

// errNotFinished rolls back a RunFinish whose statement matched no row.
var errNotFinished = errors.New("finish run: no row matched")

// releaseRunLocks is L6 for runs this transaction has just ended with
// status (statement ReleaseRunLocks): every lock naming them is cleared,
// one issue.lock_released per issue, then one run.finished {status,
// exitCode, error, and errorCode when set} per run, from its row as
// ended; then the wakes
// deferred behind those runs are promoted (heartbeat.go).
func (s *Driver) releaseRunLocks(ctx context.Context, tx pgx.Tx, a store.Actor, status clasp.RunStatus, runs []*clasp.Run) error {
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	args := actorArgs(namedArgs{"runs": ids, "status": string(status)}, a)
	var n int64
	if err := tx.QueryRow(ctx, q("ReleaseRunLocks"), args).Scan(&n); err != nil {
		return wrap(err, "release locks of runs %v", ids)
	}
	// The wakes deferred behind those runs are promoted in the same
	// transaction (store.PromoteBlockedBy).
	_, err := store.PromoteBlockedBy(ctx, s.hbTx(tx), ids)
	return err
}

// RunSweepExpired is store.Driver.RunSweepExpired, by the database
// clock: statement SweepExpiredRuns fails the batch and writes its run.lost
// rows. It locks its candidates FOR UPDATE in id order, so a concurrent
// sweeper (on any replica) waits for this batch, then leaves the runs it
// failed.
func (d *Driver) RunSweepExpired(ctx context.Context) (int, error) {
	n := 0
	err := d.Write(ctx, func(q store.Querier) error {
		return store.Wrap(q.QueryRow(ctx, "SweepExpiredRuns", store.Args{"limit": store.SweepBatch}).Scan(&n), "sweep expired runs")
	})
	return n, err
}

// IssueClearStaleLocks is store.Driver.IssueClearStaleLocks, in one
// transaction: statement StaleLockCandidates locks the candidates FOR
// UPDATE in id order (waiting for a concurrent sweeper's batch), then
// ClearStaleLocks re-checks and clears them with a snapshot taken after
// the lock and writes their issue.stale_lock_cleared rows. found is how
// many issues it locked.
func (d *Driver) IssueClearStaleLocks(ctx context.Context) (found, cleared int, err error) {
	err = d.tx(ctx, func(tx pgx.Tx) error {
		found, cleared = 0, 0
		rows, err := tx.Query(ctx, q("StaleLockCandidates"), namedArgs{"limit": store.SweepBatch})
		if err != nil {
			return fmt.Errorf("find stale locks: %w", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("find stale locks: %w", err)
		}
		found = len(ids)
		if found == 0 {
			return nil
		}
		err = tx.QueryRow(ctx, q("ClearStaleLocks"), namedArgs{"ids": ids}).Scan(&cleared)
		return wrap(err, "clear stale locks")
	})
	return found, cleared, err
}
