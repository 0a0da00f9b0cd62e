package store

// The writes of agents' keys and the authentication of a key, written once
// for every dialect on its Driver.

import (
	"context"
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
