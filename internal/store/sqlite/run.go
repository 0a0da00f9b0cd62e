package sqlite

// The statements of a run's opening and signs of life: the
// store.Driver methods, each a step of the caller's write transaction.
// SQLite's statements write one table each, so the agent's heartbeat is a
// statement of its own (renewed).

import (
	"context"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// RunOpen is store.Driver.RunOpen: statement RunOpen, then the agent's
// heartbeat, in q's write transaction.
func (*Driver) RunOpen(ctx context.Context, q store.Querier, o *store.RunOpening) (*clasp.Run, error) {
	return renewed(ctx, q, "RunOpen", o.Args())
}

// RunReplayOpen is store.Driver.RunReplayOpen: statement
// RunReplayOpen, then the agent's heartbeat, in q's write transaction.
func (*Driver) RunReplayOpen(ctx context.Context, q store.Querier, o *store.RunOpening) (*clasp.Run, error) {
	return renewed(ctx, q, "RunReplayOpen", o.Args())
}

// RunTouch is store.Driver.RunTouch: statement RunTouch, then the
// agent's heartbeat, in q's write transaction.
func (*Driver) RunTouch(ctx context.Context, q store.Querier, p *store.RunTouchParams) (*clasp.Run, error) {
	return renewed(ctx, q, "RunTouch", store.RunTouchArgs(p))
}

// renewed runs statement name, which answers a run it opened or renewed
// (no row: nil and no error), through q, then records the run's agent's
// heartbeat (statement AgentHeartbeat) in the same write. Errors are the
// driver's, untranslated.
func renewed(ctx context.Context, q store.Querier, name string, args store.Args) (*clasp.Run, error) {
	run, err := noRow(store.ScanRun(q.QueryRow(ctx, name, args)))
	if err != nil || run == nil {
		return nil, err
	}
	if _, err := q.Exec(ctx, "AgentHeartbeat", store.Args{"agent": run.AgentID}); err != nil {
		return nil, wrap(err, "heartbeat of agent %s", run.AgentID)
	}
	return run, nil
}
