package store

// The writes of agents and their keys and the authentication of a key,
// written once for every dialect: on its Driver (CRUD), and those that end
// runs in one transaction of several statements on its TxRunner
// (Heartbeat).

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/clasp-dev/clasp"
)

// AgentKeyCreate stores key hash p.TokenHash (display prefix p.Prefix,
// name KeyName) of agent p.AgentID, with its agent.key_created row {keyId,
// prefix} (statement KeyCreate: no row when the agent is missing). 404
// not_found if the agent is missing, 409 already_exists if the hash is in
// use.
func (c CRUD) AgentKeyCreate(ctx context.Context, p *AgentKeyCreateParams) (*clasp.APIKey, error) {
	args := ActorArgs(Args{"id": c.d.NewID(), "agent": p.AgentID, "prefix": p.Prefix, "hash": p.TokenHash,
		"name": KeyName(p.Name)}, p.Actor)
	var out *clasp.APIKey
	err := c.d.Write(ctx, func(q Querier) error {
		k, company, err := scanKeyCompany(q.QueryRow(ctx, "KeyCreate", args))
		if c.d.NoRows(err) {
			return ErrNotFound("agent", p.AgentID)
		}
		if err != nil {
			return Wrap(err, "create key of agent %s", p.AgentID)
		}
		out = k
		return activity(ctx, q, company, p.Actor, clasp.ActionAgentKeyCreated, "agent", k.AgentID, map[string]any{
			"keyId": k.ID, "prefix": k.Prefix,
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scanKeyCompany reads a KeyCols row followed by the key's agent's company.
func scanKeyCompany(row Row) (*clasp.APIKey, string, error) {
	var (
		k       clasp.APIKey
		company string
	)
	if err := row.Scan(append(KeyDest(&k), &company)...); err != nil {
		return nil, "", err
	}
	return &k, company, nil
}

// AgentAuthenticate finds the agent owning the unrevoked key whose hash is
// tokenHash (statement KeyAuth, a read), and records the key's use at most
// once a minute (KeyUsed, when the read says it is due). 401
// unauthenticated if there is none or the agent is terminated.
func (c CRUD) AgentAuthenticate(ctx context.Context, tokenHash string) (*clasp.Agent, error) {
	var a clasp.Agent
	if err := c.authenticate(ctx, "KeyAuth", Args{"hash": tokenHash}, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// AgentAuthenticateRun is AgentAuthenticate plus, in the same read
// (statement KeyAuthRun), run runID when it is the agent's, live and
// renewed less than minRenew ago by the clock that judges liveness, as
// RunTouch judges it (see Store); nil otherwise. 401 unauthenticated as
// AgentAuthenticate.
func (c CRUD) AgentAuthenticateRun(ctx context.Context, tokenHash, runID string, minRenew time.Duration) (*clasp.Agent, *clasp.Run, error) {
	var (
		a     clasp.Agent
		r     clasp.Run
		found bool
	)
	args := Args{"hash": tokenHash, "run": runID, "min_us": minRenew.Microseconds()}
	if err := c.authenticate(ctx, "KeyAuthRun", args, &a, append([]any{&found}, RunDest(&r)...)...); err != nil {
		return nil, nil, err
	}
	if !found {
		return &a, nil, nil
	}
	return &a, &r, nil
}

// authenticate runs the read name (KeyAuth or KeyAuthRun: the key's id,
// whether its use is due to be recorded, its agent's columns into a, then
// the columns of rest), then records the key's use when due (KeyUsed, a
// write of no activity row). 401 unauthenticated when there is no row or
// the agent is terminated; the translated error of the database.
func (c CRUD) authenticate(ctx context.Context, name string, args Args, a *clasp.Agent, rest ...any) error {
	var (
		keyID string
		due   bool
	)
	dest := append(append([]any{&keyID, &due}, AgentDest(a)...), rest...)
	err := c.d.Read().QueryRow(ctx, name, args).Scan(dest...)
	if c.d.NoRows(err) || err == nil && a.Status == clasp.AgentTerminated {
		return ErrUnauthenticated()
	}
	if err != nil {
		return c.d.Translate(fmt.Errorf("authenticate agent key: %w", err))
	}
	if !due {
		return nil
	}
	return writeQuiet(c.d)(ctx, func(q Querier) error {
		_, err := q.Exec(ctx, "KeyUsed", Args{"id": keyID})
		return Wrap(err, "record use of key %s", keyID)
	})
}

// AgentUpdate changes an agent's status, name or role (statement
// AgentUpdate, with its agent.updated row). Setting status terminated, in
// the same transaction, first ends its queued and running runs as
// cancelled (agent_terminated, one run.finished each), clearing every lock
// naming them with one issue.lock_released {runId, runStatus} per issue
// (rule L6, as RunFinish), and unassigns its open issues (agentTerminate:
// runs, then their issues, then the agent, the order every other writer
// locks them in), then revokes its keys (AgentRevokeKeys). terminated is
// final. Errors: 400 invalid_request for a bad status or an empty name,
// 404 not_found, 409 already_exists for a taken name, 422
// precondition_failed (details.field status) for a terminated agent set
// to another status (AgentUpdateRefusal).
func (h Heartbeat) AgentUpdate(ctx context.Context, p *AgentUpdateParams) (*clasp.Agent, error) {
	c, err := p.Validate()
	if err != nil {
		return nil, err
	}
	changes, err := json.Marshal(c.Details)
	if err != nil {
		return nil, fmt.Errorf("agent.updated details: %w", err)
	}
	args := ActorArgs(Args{"id": p.AgentID, "status": c.Status, "name": c.Name, "name_key": c.NameKey, "role": c.Role,
		"changes": string(changes)}, p.Actor)
	var out *clasp.Agent
	err = h.TxRunner(ctx, func(tx HeartbeatTx) error {
		if c.Terminates {
			if err := agentTerminate(ctx, tx, p.AgentID, p.Actor); err != nil {
				return err
			}
		}
		a, err := ScanAgent(tx.QueryRow(ctx, "AgentUpdate", args))
		switch {
		case h.d.NoRows(err):
			cur, err := ScanAgent(tx.QueryRow(ctx, "AgentGet", Args{"id": p.AgentID}))
			if cur, err = orNone(h.d, cur, err); err != nil {
				return fmt.Errorf("get agent %s: %w", p.AgentID, err)
			}
			if err := AgentUpdateRefusal(p.AgentID, cur); err != nil {
				return err
			}
			return fmt.Errorf("update agent %s: refused for no known reason", p.AgentID)
		case h.d.Unique(err):
			return ErrAgentNameTaken(*p.Name)
		case err != nil:
			return fmt.Errorf("update agent %s: %w", p.AgentID, err)
		}
		out = a
		if err := activity(ctx, tx, a.CompanyID, p.Actor, clasp.ActionAgentUpdated, "agent", a.ID, c.Details); err != nil {
			return err
		}
		if !c.Terminates {
			return nil
		}
		_, err = tx.Exec(ctx, "AgentRevokeKeys", Args{"agent": a.ID})
		return Wrap(err, "revoke keys of agent %s", a.ID)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// agentTerminate is rule L6 for agent agentID being terminated, in
// transaction tx: its queued and running runs end as cancelled
// (agent_terminated) with their locks released and one run.finished each
// (endRuns, statement AgentEndRuns), then its open issues are unassigned
// (HeartbeatTx.UnassignIssues).
func agentTerminate(ctx context.Context, tx HeartbeatTx, agentID string, actor Actor) error {
	if err := endRuns(ctx, tx, actor, "agent "+agentID, "AgentEndRuns", Args{"agent": agentID}); err != nil {
		return err
	}
	return tx.UnassignIssues(ctx, agentID, actor)
}

// endRuns runs statement name, which ends runs as cancelled and returns
// them (those of an agent being terminated, or of a key being revoked:
// what names them), then releases every lock naming them with one
// run.finished each (rule L6, releaseRunLocks).
func endRuns(ctx context.Context, tx HeartbeatTx, actor Actor, what, name string, args Args) error {
	runs, err := queryAll(ctx, tx, name, args, ScanRun)
	if err != nil {
		return fmt.Errorf("end runs of %s: %w", what, err)
	}
	if len(runs) == 0 {
		return nil
	}
	return releaseRunLocks(ctx, tx, actor, clasp.RunCancelled, runs, true)
}

// releaseRunLocks is rule L6 for runs tx has just ended with status: their
// locks released with their activity rows (HeartbeatTx.ReleaseRunLocks;
// run.finished each when finished), then the wakes deferred behind them
// promoted (PromoteBlockedBy), in tx.
func releaseRunLocks(ctx context.Context, tx HeartbeatTx, actor Actor, status clasp.RunStatus, runs []*clasp.Run, finished bool) error {
	if err := tx.ReleaseRunLocks(ctx, actor, status, runs, finished); err != nil {
		return err
	}
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	_, err := PromoteBlockedBy(ctx, tx, ids)
	return err
}

// AgentKeyRevoke revokes key keyID of agent agentID and answers it, in one
// transaction: the runs opened with the key end first (endRuns, statement
// KeyEndRuns: rule L6, as a termination ends an agent's runs), then the
// key is revoked (KeyRevoke, with its agent.key_revoked row {keyId,
// prefix}). Revoking a revoked key answers it unchanged (KeyGet). 404
// not_found if the agent has no such key.
func (h Heartbeat) AgentKeyRevoke(ctx context.Context, agentID, keyID string, actor Actor) (*clasp.APIKey, error) {
	var out *clasp.APIKey
	err := h.TxRunner(ctx, func(tx HeartbeatTx) error {
		if err := endRuns(ctx, tx, actor, "key "+keyID, "KeyEndRuns", Args{"id": keyID, "agent": agentID}); err != nil {
			return err
		}
		k, company, err := scanKeyCompany(tx.QueryRow(ctx, "KeyRevoke", ActorArgs(Args{"id": keyID, "agent": agentID}, actor)))
		if h.d.NoRows(err) {
			k, err = ScanKey(tx.QueryRow(ctx, "KeyGet", Args{"id": keyID, "agent": agentID}))
			if h.d.NoRows(err) {
				return ErrNotFound("key", keyID)
			}
			out = k
			return Wrap(err, "get key %s", keyID)
		}
		if err != nil {
			return Wrap(err, "revoke key %s", keyID)
		}
		out = k
		return activity(ctx, tx, company, actor, clasp.ActionAgentKeyRevoked, "agent", agentID, map[string]any{
			"keyId": k.ID, "prefix": k.Prefix,
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
