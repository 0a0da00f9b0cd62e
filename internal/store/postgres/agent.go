package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// AgentUpdate changes an agent's status, name or role. Terminating it, in
// the same transaction, ends its queued and running runs as cancelled
// (errorCode agent_terminated, one run.finished each), clears every lock
// naming them (one issue.lock_released per issue, rule L6), unassigns
// every issue assigned to it that is not done or cancelled (in_progress
// becomes todo, any lock left is cleared; statement AgentUnassignIssues)
// and revokes its keys. 400 invalid_request for a bad status or an empty
// name, 404 not_found, 409 already_exists for a taken name, 422
// precondition_failed (field status) for a terminated agent given another
// status (terminated is final).
func (s *Store) AgentUpdate(ctx context.Context, p *store.AgentUpdateParams) (*clasp.Agent, error) {
	c, err := p.Validate()
	if err != nil {
		return nil, err
	}
	details, err := jsonArg(c.Details)
	if err != nil {
		return nil, fmt.Errorf("agent.updated details: %w", err)
	}
	args := actorArgs(namedArgs{"id": p.AgentID, "status": c.Status, "name": c.Name, "name_key": c.NameKey, "role": c.Role,
		"changes": details}, p.Actor)
	var out *clasp.Agent
	err = s.tx(ctx, func(tx pgx.Tx) error {
		if c.Terminates {
			// Its runs end first (run rows, then their issues, then the
			// agent: the order every other writer locks them in).
			rows, err := tx.Query(ctx, q("AgentEndRuns"), namedArgs{"agent": p.AgentID})
			if err != nil {
				return fmt.Errorf("end runs of agent %s: %w", p.AgentID, err)
			}
			runs, err := store.ScanAll(rows, store.ScanRun)
			if err != nil {
				return fmt.Errorf("end runs of agent %s: %w", p.AgentID, err)
			}
			if len(runs) > 0 {
				if err := s.releaseRunLocks(ctx, tx, p.Actor, clasp.RunCancelled, runs); err != nil {
					return err
				}
			}
			// Then its open issues lose it as their assignee (L6).
			var n int64
			if err := tx.QueryRow(ctx, q("AgentUnassignIssues"), actorArgs(namedArgs{"agent": p.AgentID}, p.Actor)).Scan(&n); err != nil {
				return wrap(err, "unassign the issues of agent %s", p.AgentID)
			}
		}
		a, err := store.ScanAgent(tx.QueryRow(ctx, q("AgentUpdate"), args))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			cur, err := noRow(store.ScanAgent(tx.QueryRow(ctx, q("AgentGet"), namedArgs{"id": p.AgentID})))
			if err != nil {
				return fmt.Errorf("get agent %s: %w", p.AgentID, err)
			}
			if err := store.AgentUpdateRefusal(p.AgentID, cur); err != nil {
				return err
			}
			return fmt.Errorf("update agent %s: refused for no known reason", p.AgentID)
		case isUnique(err):
			return store.ErrAgentNameTaken(*p.Name)
		}
		out = a
		return wrap(err, "update agent %s", p.AgentID)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AgentKeyRevoke revokes key keyID of agent agentID and answers it;
// revoking a revoked key answers it unchanged. 404 not_found if the agent
// has no such key. The runs opened with the key end first, in the same
// transaction (statement KeyEndRuns, then releaseRunLocks), as
// store.Store.AgentKeyRevoke says.
func (s *Store) AgentKeyRevoke(ctx context.Context, agentID, keyID string, actor store.Actor) (*clasp.APIKey, error) {
	args := actorArgs(namedArgs{"id": keyID, "agent": agentID}, actor)
	var out *clasp.APIKey
	err := s.tx(ctx, func(tx pgx.Tx) error {
		// The runs opened with the key end first (run rows, then their
		// issues: the order every other writer locks them in).
		rows, err := tx.Query(ctx, q("KeyEndRuns"), namedArgs{"id": keyID, "agent": agentID})
		if err != nil {
			return fmt.Errorf("end runs of key %s: %w", keyID, err)
		}
		runs, err := store.ScanAll(rows, store.ScanRun)
		if err != nil {
			return fmt.Errorf("end runs of key %s: %w", keyID, err)
		}
		if len(runs) > 0 {
			if err := s.releaseRunLocks(ctx, tx, actor, clasp.RunCancelled, runs); err != nil {
				return err
			}
		}
		k, err := store.ScanKey(tx.QueryRow(ctx, q("KeyRevoke"), args))
		if errors.Is(err, pgx.ErrNoRows) {
			k, err = store.ScanKey(tx.QueryRow(ctx, q("KeyGet"), namedArgs{"id": keyID, "agent": agentID}))
			if errors.Is(err, pgx.ErrNoRows) {
				return notFound("key", keyID)
			}
		}
		out = k
		return wrap(err, "revoke key %s", keyID)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

