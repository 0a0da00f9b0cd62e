package postgres

// The statements of a run's opening and signs of life: the
// store.Driver methods, each one statement that also records the
// agent's heartbeat (RunOpen: run.started and the Idempotency-Key's
// record too).

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// RunOpen is store.Driver.RunOpen: statement RunOpen through q (the
// pool's Querier: each statement its own transaction). Under a live-run
// limit (o.MaxLive positive) it runs in a transaction of its own on the
// pool after statement RunOpenLockAgent: the agent's row lock, taken
// before RunOpen's snapshot, makes its count see every run a concurrent
// open committed.
func (d *Driver) RunOpen(ctx context.Context, q store.Querier, o *store.RunOpening) (*clasp.Run, error) {
	if o.MaxLive <= 0 {
		return noRow(store.ScanRun(q.QueryRow(ctx, "RunOpen", o.Args())))
	}
	var out *clasp.Run
	err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		if _, err := (pooled{tx}).Exec(ctx, "RunOpenLockAgent", store.Args{"agent": o.AgentID}); err != nil {
			return err
		}
		var err error
		out, err = noRow(store.ScanRun(pooled{tx}.QueryRow(ctx, "RunOpen", o.Args())))
		return err
	})
	return out, err
}

// RunReplayOpen is store.Driver.RunReplayOpen: statement RunReplayOpen
// through q.
func (*Driver) RunReplayOpen(ctx context.Context, q store.Querier, o *store.RunOpening) (*clasp.Run, error) {
	return noRow(store.ScanRun(q.QueryRow(ctx, "RunReplayOpen", o.Args())))
}

// RunTouch is store.Driver.RunTouch: statement RunTouch through q.
func (*Driver) RunTouch(ctx context.Context, q store.Querier, p *store.RunTouchParams) (*clasp.Run, error) {
	return noRow(store.ScanRun(q.QueryRow(ctx, "RunTouch", store.RunTouchArgs(p))))
}

// noRow is v, or nil and no error when err is pgx's no-row error.
func noRow[T any](v *T, err error) (*T, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return v, err
}
