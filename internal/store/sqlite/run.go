package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// RunOpen is store.Store.RunOpen, in one write transaction: the
// idempotency lookup (a replay renews the recorded run with
// runReplayOpen), the agent and issue reads, statement RunOpen, the
// agent's heartbeat, run.started and the idempotency record.
func (s *Driver) RunOpen(ctx context.Context, p *store.RunOpenParams) (*clasp.Run, error) {
	ttl, source, err := p.Check()
	if err != nil {
		return nil, err
	}
	var out *clasp.Run
	err = s.write(ctx, func(tx *wtx) error {
		if id, err := tx.idempotencyLookup(ctx, p.Idempotency, store.IdemRun); err != nil || id != "" {
			if err != nil {
				return err
			}
			out, err = tx.runReplayOpen(ctx, id, p.AgentID, p.TokenHashOf(id), ttl)
			p.Idempotency.Replayed = err == nil
			return err
		}
		a, err := tx.agent(ctx, p.AgentID)
		if err != nil {
			return err
		}
		if a.Status == clasp.AgentTerminated {
			return store.ErrAgentTerminated(a.ID)
		}
		var issueID any
		if p.IssueID != "" {
			rid, rident := store.SplitRef(p.IssueID)
			var id, company string
			err := tx.queryRow(ctx, qIssueRef, sql.Named("rid", rid), sql.Named("rident", rident),
				sql.Named("company", a.CompanyID)).Scan(&id, &company)
			if errors.Is(err, sql.ErrNoRows) {
				return notFound("issue", p.IssueID)
			}
			if err != nil {
				return fmt.Errorf("find issue %s: %w", p.IssueID, err)
			}
			issueID = id
		}
		id := tx.s.newID()
		run, err := store.ScanRun(tx.queryRow(ctx, "RunOpen", sql.Named("id", id), sql.Named("company", a.CompanyID),
			sql.Named("agent", a.ID), sql.Named("source", source), sql.Named("issue", issueID), sql.Named("now", tx.now),
			sql.Named("ttl", ttl.Microseconds()), sql.Named("hash", nullable(p.TokenHashOf(id))),
			sql.Named("key_hash", nullable(p.KeyHash)), sql.Named("max_live", p.MaxLive)))
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrLiveRunsLimit(a.ID, p.MaxLive, ttl)
		}
		if err != nil {
			return fmt.Errorf("open run of agent %s: %w", a.ID, err)
		}
		out = run
		if _, err := tx.exec(ctx, "AgentHeartbeat", sql.Named("agent", a.ID), sql.Named("now", tx.now)); err != nil {
			return fmt.Errorf("heartbeat of agent %s: %w", a.ID, err)
		}
		if err := tx.logActivity(ctx, run.CompanyID, p.Actor, clasp.ActionRunStarted, "run", run.ID, map[string]any{
			"agentId": a.ID, "issueId": run.IssueID, "invocationSource": source,
		}); err != nil {
			return err
		}
		return tx.idempotencyRecord(ctx, p.Idempotency, store.IdemRun, run.ID)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// runReplayOpen answers a replayed RunOpen: while run runID of agentID is
// live and tokenHash is its token hash, its lease is renewed to now + ttl,
// with the agent's heartbeat, and the run returned. 409 run_not_live once
// it is terminal or lost; 422 idempotency_key_reused while live with
// another token hash; 404 not_found if it is gone.
func (t *wtx) runReplayOpen(ctx context.Context, runID, agentID, tokenHash string, ttl time.Duration) (*clasp.Run, error) {
	r, err := store.ScanRun(t.queryRow(ctx, "RunReplayOpen", sql.Named("run", runID), sql.Named("agent", agentID),
		sql.Named("hash", nullable(tokenHash)), sql.Named("ttl", ttl.Microseconds()), sql.Named("now", t.now)))
	if errors.Is(err, sql.ErrNoRows) {
		r, err := t.callerRun(ctx, runID)
		if err != nil {
			return nil, err
		}
		return nil, store.RunReplayRefusal(runID, agentID, r)
	}
	if err != nil {
		return nil, fmt.Errorf("replay open of run %s: %w", runID, err)
	}
	if _, err := t.exec(ctx, "AgentHeartbeat", sql.Named("agent", agentID), sql.Named("now", t.now)); err != nil {
		return nil, fmt.Errorf("heartbeat of agent %s: %w", agentID, err)
	}
	return r, nil
}

// RunTouch checks that run RunID exists (else 422 run_not_found), is
// AgentID's (else 403 run_not_owned) and is live (else 409 run_not_live),
// and renews its lease to now + LeaseTTL with the agent's heartbeat. Unless
// Force, the write is skipped when the last sign of life is less than
// MinRenewInterval old (read on a reader connection).
func (s *Driver) RunTouch(ctx context.Context, p *store.RunTouchParams) (*clasp.Run, error) {
	if !p.Force && p.MinRenewInterval > 0 {
		now := s.now()
		r, err := store.ScanRun(s.readRow(ctx, "RunGet", sql.Named("id", p.RunID)))
		if err == nil && r.AgentID == p.AgentID && r.Live(now) && r.LastSignOfLifeAt != nil &&
			now.Sub(*r.LastSignOfLifeAt) < p.MinRenewInterval {
			return r, nil
		}
	}
	var out *clasp.Run
	err := s.write(ctx, func(tx *wtx) error {
		r, err := store.ScanRun(tx.queryRow(ctx, "RunTouch", sql.Named("run", p.RunID), sql.Named("agent", p.AgentID),
			sql.Named("ttl", p.TTL().Microseconds()), sql.Named("now", tx.now)))
		if errors.Is(err, sql.ErrNoRows) {
			r, err := tx.callerRun(ctx, p.RunID)
			if err != nil {
				return err
			}
			if err := store.RunTouchRefusal(p.RunID, p.AgentID, r); err != nil {
				return err
			}
			return fmt.Errorf("renew lease of run %s: refused for no known reason", p.RunID)
		}
		if err != nil {
			return fmt.Errorf("renew lease of run %s: %w", p.RunID, err)
		}
		out = r
		_, err = tx.exec(ctx, "AgentHeartbeat", sql.Named("agent", r.AgentID), sql.Named("now", tx.now))
		return wrap(err, "heartbeat of agent %s", r.AgentID)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
