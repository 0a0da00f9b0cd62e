package postgres

// The ends of runs (rule L6: RunFinish and the locks it releases) and the
// sweeper's passes (RULES.md, The sweeper): the store.Driver methods,
// each one transaction. PostgreSQL's statements write their own activity
// rows.

import (
	"context"
	"fmt"

	"github.com/clasp-dev/clasp/internal/store"
	"github.com/jackc/pgx/v5"
)

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
