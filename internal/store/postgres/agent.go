package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

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

// AgentKeyCreate stores a key hash for an agent. 404 not_found if the agent
// is missing, 409 already_exists if the hash is in use.
func (s *Store) AgentKeyCreate(ctx context.Context, p *store.AgentKeyCreateParams) (*clasp.APIKey, error) {
	args := actorArgs(namedArgs{"id": s.newID(), "agent": p.AgentID, "prefix": p.Prefix, "hash": p.TokenHash, "name": store.KeyName(p.Name)}, p.Actor)
	var out *clasp.APIKey
	err := s.retry(ctx, func() error {
		k, err := store.ScanKey(s.pool.QueryRow(ctx, q("KeyCreate"), args))
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound("agent", p.AgentID)
		}
		out = k
		return wrap(err, "create key of agent %s", p.AgentID)
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

// AgentAuthenticate finds the agent owning the unrevoked key whose hash is
// tokenHash, and records the key's use (at most once a minute, by the
// database clock) in the same statement. 401 unauthenticated if there is
// none or the agent is terminated.
func (s *Store) AgentAuthenticate(ctx context.Context, tokenHash string) (*clasp.Agent, error) {
	var a *clasp.Agent
	err := s.retryQuiet(ctx, func() error {
		var err error
		a, err = store.ScanAgent(s.pool.QueryRow(ctx, q("KeyAuth"), namedArgs{"hash": tokenHash}))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) || clasp.ErrorCode(err) == clasp.CodeNotFound || err == nil && a.Status == clasp.AgentTerminated {
		return nil, store.ErrUnauthenticated()
	}
	if err != nil {
		return nil, translate(fmt.Errorf("authenticate agent key: %w", err))
	}
	return a, nil
}

// AgentAuthenticateRun is AgentAuthenticate plus, in the same statement,
// run runID when it is the agent's, live and renewed less than minRenew
// ago by the database clock (see store.Store); nil otherwise. 401
// unauthenticated as AgentAuthenticate.
func (s *Store) AgentAuthenticateRun(ctx context.Context, tokenHash, runID string, minRenew time.Duration) (*clasp.Agent, *clasp.Run, error) {
	var (
		a             clasp.Agent
		r             clasp.Run
		keyID         string
		useDue, found bool
	)
	dest := append([]any{&keyID, &useDue}, store.AgentDest(&a)...)
	dest = append(dest, &found)
	dest = append(dest, store.RunDest(&r)...)
	err := s.pool.QueryRow(ctx, q("KeyAuthRun"), namedArgs{"hash": tokenHash, "run": runID, "min_us": minRenew.Microseconds()}).Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && a.Status == clasp.AgentTerminated {
		return nil, nil, store.ErrUnauthenticated()
	}
	if err != nil {
		return nil, nil, translate(fmt.Errorf("authenticate agent key: %w", err))
	}
	if useDue {
		err := s.retryQuiet(ctx, func() error {
			_, err := s.pool.Exec(ctx, q("KeyUsed"), namedArgs{"id": keyID})
			return err
		})
		if err != nil {
			return nil, nil, wrap(err, "record use of key %s", keyID)
		}
	}
	if !found {
		return &a, nil, nil
	}
	return &a, &r, nil
}
