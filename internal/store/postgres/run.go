package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// RunOpen is store.Store.RunOpen, by the database clock: statement
// RunOpen resolves the issue, inserts the run, records the agent's
// heartbeat, run.started and the idempotency record in one statement; a
// replay renews the recorded run with statement RunReplayOpen.
func (s *Driver) RunOpen(ctx context.Context, p *store.RunOpenParams) (*clasp.Run, error) {
	ttl, source, err := p.Check()
	if err != nil {
		return nil, err
	}
	rid, rident := store.SplitRef(p.IssueID)
	newID := s.newID()
	args := actorArgs(namedArgs{"id": newID, "agent": p.AgentID, "issue_ref": p.IssueID, "rid": rid, "rident": rident,
		"source": source, "ttl_us": ttl.Microseconds(),
		"token_hash": nullable(p.TokenHashOf(newID)), "key_hash": nullable(p.KeyHash), "max_live": p.MaxLive}, p.Actor)
	idemArgs(args, p.Idempotency, store.IdemRun)
	replay := func(id string) (*clasp.Run, error) {
		var out *clasp.Run
		err := s.retry(ctx, func() error {
			var err error
			out, err = store.ScanRun(s.pool.QueryRow(ctx, q("RunReplayOpen"), namedArgs{"id": id, "token_hash": nullable(p.TokenHashOf(id)),
				"ttl_us": ttl.Microseconds()}))
			return err
		})
		if isNotFound(err) {
			r, err := callerRun(ctx, s.pool, id)
			if err != nil {
				return nil, translate(err)
			}
			return nil, store.RunReplayRefusal(id, p.AgentID, r)
		}
		return out, wrap(err, "reopen run %s", id)
	}
	return idempotent(ctx, s, p.Idempotency, store.IdemRun, replay, func() (*clasp.Run, error) {
		var out *clasp.Run
		open := func(tx pgxQuerier) error {
			if p.MaxLive > 0 {
				// The agent's row lock, taken before RunOpen's snapshot,
				// makes its count see every concurrent open's run.
				if _, err := tx.Exec(ctx, q("RunOpenLockAgent"), namedArgs{"agent": p.AgentID}); err != nil {
					return wrap(err, "open run of agent %s", p.AgentID)
				}
			}
			r, err := store.ScanRun(tx.QueryRow(ctx, q("RunOpen"), args))
			if errors.Is(err, pgx.ErrNoRows) {
				return s.runOpenRefused(ctx, tx, p)
			}
			out = r
			return wrap(err, "open run of agent %s", p.AgentID)
		}
		err := s.retry(ctx, func() error {
			if p.MaxLive <= 0 {
				return open(s.pool) // one statement: its own transaction
			}
			return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return open(tx) })
		})
		if err != nil {
			return nil, err
		}
		return out, nil
	})
}

// runOpenRefused explains a RunOpen that inserted nothing, read in its
// transaction: a missing or terminated agent, the agent's live-run limit,
// else the issue it named was not found.
//
// Every read goes through tx, never a second pooled connection: opens
// waiting for the agent's row lock each hold a connection, and one more
// asked of a drained pool by the lock's holder would wait for them.
func (s *Driver) runOpenRefused(ctx context.Context, tx pgxQuerier, p *store.RunOpenParams) error {
	a, err := store.ScanAgent(tx.QueryRow(ctx, q("AgentGet"), namedArgs{"id": p.AgentID}))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound("agent", p.AgentID)
	}
	if err != nil {
		return wrap(err, "get agent %s", p.AgentID)
	}
	if a.Status == clasp.AgentTerminated {
		return store.ErrAgentTerminated(a.ID)
	}
	if p.MaxLive > 0 {
		var n int
		if err := tx.QueryRow(ctx, q("RunLiveCount"), namedArgs{"agent": p.AgentID}).Scan(&n); err != nil {
			return wrap(err, "count live runs of agent %s", p.AgentID)
		}
		if n >= p.MaxLive {
			ttl, _, _ := p.Check()
			return store.ErrLiveRunsLimit(p.AgentID, p.MaxLive, ttl)
		}
	}
	return notFound("issue", p.IssueID)
}

// RunTouch checks that run RunID exists (else 422 run_not_found), is
// AgentID's (else 403 run_not_owned) and is live (else 409 run_not_live),
// and renews its lease to now + LeaseTTL with the agent's heartbeat, all
// by the database clock in one statement. Unless Force, the write is
// skipped when the last sign of life is less than MinRenewInterval old.
func (s *Driver) RunTouch(ctx context.Context, p *store.RunTouchParams) (*clasp.Run, error) {
	args := namedArgs{"run": p.RunID, "agent": p.AgentID, "ttl_us": p.TTL().Microseconds(),
		"force": p.Force || p.MinRenewInterval <= 0, "min_us": p.MinRenewInterval.Microseconds()}
	var (
		r       clasp.Run
		renewed bool
		state   string
	)
	err := s.retryQuiet(ctx, func() error { // a lease renewal writes no activity
		return s.pool.QueryRow(ctx, q("RunTouch"), args).Scan(append(store.RunDest(&r), &renewed, &state)...)
	})
	found := !isNotFound(err)
	if err != nil && found {
		return nil, wrap(err, "renew lease of run %s", p.RunID)
	}
	if !renewed {
		if err := store.RunTouchRefusal(p.RunID, p.AgentID, store.RunState{Found: found, AgentID: r.AgentID, State: state}); err != nil {
			return nil, err
		}
	}
	return &r, nil
}
