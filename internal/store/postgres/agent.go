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

const (
	// sqlAgentCreate inserts an active agent of an existing company, and its
	// agent.created row; no row when the company is missing.
	sqlAgentCreate = `WITH a AS (
		INSERT INTO agents (id, company_id, name, name_key, role, status, created_at)
		SELECT @id::text, c.id, @name::text, @name_key::text, @role::text, 'active', now() FROM companies c WHERE c.id = @company::text
		RETURNING ` + agentCols + `
	), act AS (` + sqlActivityInto + `
		SELECT a.company_id, ` + sqlActorCols + `, 'agent.created', 'agent', a.id,
			jsonb_build_object('name', a.name, 'role', a.role) FROM a
	)
	SELECT ` + agentCols + ` FROM a`
	sqlAgentGet = `SELECT ` + agentCols + ` FROM agents WHERE id = $1`

	// sqlAgentEndRuns ends the queued and running runs of an agent being
	// terminated as cancelled (errorCode agent_terminated), guarded like a
	// finish; the UPDATE waits for checkouts holding them FOR SHARE.
	sqlAgentEndRuns = `UPDATE runs r SET
		status = 'cancelled',
		error_code = 'agent_terminated',
		error = coalesce(r.error, 'agent terminated'),
		finished_at = now()
	WHERE r.agent_id = $1 AND r.status IN ('queued', 'running')
	RETURNING ` + runCols

	// sqlAgentUpdate changes an agent; terminating it revokes its keys in
	// the same statement; one agent.updated row. terminated is final: no row
	// for a change of a terminated agent to another status.
	sqlAgentUpdate = `WITH a AS (
		UPDATE agents SET
			status = coalesce(@status::text, status),
			name = coalesce(@name::text, name),
			name_key = coalesce(@name_key::text, name_key),
			role = coalesce(@role::text, role)
		WHERE id = @id::text AND NOT (status = 'terminated' AND coalesce(@status::text, status) <> 'terminated')
		RETURNING ` + agentCols + `
	), revoked AS (
		UPDATE agent_api_keys SET revoked_at = now()
		WHERE agent_id IN (SELECT id FROM a WHERE status = 'terminated') AND revoked_at IS NULL
	), act AS (` + sqlActivityInto + `
		SELECT a.company_id, ` + sqlActorCols + `, 'agent.updated', 'agent', a.id, @changes::jsonb FROM a
	)
	SELECT ` + agentCols + ` FROM a`

	// sqlKeyCreate stores a key hash of an existing agent and its
	// agent.key_created row; no row when the agent is missing.
	sqlKeyCreate = `WITH a AS (
		SELECT id, company_id FROM agents WHERE id = @agent::text
	), k AS (
		INSERT INTO agent_api_keys (id, agent_id, prefix, token_hash, created_at, name)
		SELECT @id::text, a.id, @prefix::text, @hash::text, now(), @name::text FROM a
		RETURNING ` + keyCols + `
	), act AS (` + sqlActivityInto + `
		SELECT a.company_id, ` + sqlActorCols + `, 'agent.key_created', 'agent', a.id,
			jsonb_build_object('keyId', k.id, 'prefix', k.prefix) FROM k, a
	)
	SELECT ` + keyCols + ` FROM k`
	// sqlKeyRevoke revokes an unrevoked key of an agent and writes its
	// agent.key_revoked row; no row when there is no such unrevoked key.
	sqlKeyRevoke = `WITH k AS (
		UPDATE agent_api_keys SET revoked_at = now() WHERE id = @id::text AND agent_id = @agent::text AND revoked_at IS NULL
		RETURNING ` + keyCols + `
	), act AS (` + sqlActivityInto + `
		SELECT a.company_id, ` + sqlActorCols + `, 'agent.key_revoked', 'agent', a.id,
			jsonb_build_object('keyId', k.id, 'prefix', k.prefix) FROM k JOIN agents a ON a.id = k.agent_id
	)
	SELECT ` + keyCols + ` FROM k`
	sqlKeyGet  = `SELECT ` + keyCols + ` FROM agent_api_keys WHERE id = $1 AND agent_id = $2`
	sqlKeyList = `SELECT ` + keyCols + ` FROM agent_api_keys WHERE agent_id = $1 ORDER BY created_at, id`

	// sqlKeyAuth finds the unrevoked key with a hash and its agent, and
	// records the key's use at most once a minute (database clock; the
	// UPDATE writes nothing when the last use is recent).
	sqlKeyAuth = `WITH k AS (
		SELECT k.id AS key_id, ` + qualifyAgent + `
		FROM agent_api_keys k JOIN agents a ON a.id = k.agent_id
		WHERE k.token_hash = $1 AND k.revoked_at IS NULL
	), used AS (
		UPDATE agent_api_keys SET last_used_at = now()
		WHERE id IN (SELECT key_id FROM k WHERE status <> 'terminated')
			AND (last_used_at IS NULL OR last_used_at <= now() - interval '1 minute')
	)
	SELECT ` + agentCols + ` FROM k`
	qualifyAgent = `a.id, a.company_id, a.name, a.name_key, a.role, a.status, a.created_at, a.last_heartbeat_at`

	// sqlKeyAuthRun is a pure read (no data-modifying CTE, so no write
	// lock and no index opened for writing on the hot path): the agent of
	// the unrevoked key with hash $1, whether the key's use is due to be
	// recorded (last recorded a minute ago or more, database clock; the
	// caller then runs sqlKeyUsed, at most once a minute per key), and the
	// run $2 when it is the agent's, live and renewed less than $3 µs ago
	// (database clock): found, then its columns (coalesced to zero values
	// when there is no such run).
	sqlKeyAuthRun = `SELECT k.id, k.last_used_at IS NULL OR k.last_used_at <= now() - interval '1 minute',
		` + qualifyAgent + `, r.id IS NOT NULL,
		coalesce(r.id, ''), coalesce(r.company_id, ''), coalesce(r.agent_id, ''), coalesce(r.status, ''),
		coalesce(r.invocation_source, ''), r.issue_id, r.retry_of_run_id, coalesce(r.attempt, 0), r.pid, r.host_id,
		r.lease_expires_at, r.last_sign_of_life_at, r.started_at, r.finished_at, r.exit_code, r.error_code, r.error,
		coalesce(r.created_at, 'epoch'::timestamptz)
	FROM agent_api_keys k JOIN agents a ON a.id = k.agent_id
		LEFT JOIN runs r ON r.id = $2::text AND r.agent_id = a.id AND ` + "(r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()))" + `
			AND $3::bigint > 0 AND r.last_sign_of_life_at > now() - $3::bigint * interval '1 microsecond'
	WHERE k.token_hash = $1 AND k.revoked_at IS NULL`
	// sqlKeyUsed records the use of key $1 at most once a minute
	// (database clock; writes nothing when the last use is recent).
	sqlKeyUsed = `UPDATE agent_api_keys SET last_used_at = now()
	WHERE id = $1 AND (last_used_at IS NULL OR last_used_at <= now() - interval '1 minute')`
)

// AgentCreate creates an active agent of a company. 400 invalid_request
// for an empty name, 404 not_found if the company is missing, 409
// already_exists if the name key is taken in the company.
func (s *Store) AgentCreate(ctx context.Context, p *store.AgentCreateParams) (*clasp.Agent, error) {
	name, err := p.Validate()
	if err != nil {
		return nil, err
	}
	args := actorArgs(namedArgs{"id": s.newID(), "name": name, "name_key": clasp.NameKey(name), "role": p.Role,
		"company": p.CompanyID}, p.Actor)
	var out *clasp.Agent
	err = s.retry(ctx, func() error {
		a, err := scanAgent(s.pool.QueryRow(ctx, sqlAgentCreate, args))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return notFound("company", p.CompanyID)
		case isUnique(err):
			return store.ErrAgentNameTaken(name)
		}
		out = a
		return wrap(err, "create agent")
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AgentGet returns an agent; 404 not_found.
func (s *Store) AgentGet(ctx context.Context, id string) (*clasp.Agent, error) {
	a, err := scanAgent(s.pool.QueryRow(ctx, sqlAgentGet, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound("agent", id)
	}
	if err != nil {
		return nil, translate(fmt.Errorf("get agent %s: %w", id, err))
	}
	return a, nil
}

// AgentList returns the agents of a company, oldest first.
func (s *Store) AgentList(ctx context.Context, companyID string, page store.Page) ([]*clasp.Agent, string, error) {
	return listPage(ctx, s, "agents", agentCols, []string{"company_id = ?"}, []any{companyID}, page, true, scanAgent,
		func(a *clasp.Agent) string { return encodeCursor(a.CreatedAt, a.ID) })
}

// AgentUpdate changes an agent's status, name or role. Terminating it, in
// the same transaction, ends its queued and running runs as cancelled
// (errorCode agent_terminated, one run.finished each), clears every lock
// naming them (one issue.lock_released per issue, rule L6) and revokes its
// keys. 400 invalid_request for a bad status or an empty name, 404
// not_found, 409 already_exists for a taken name, 422 precondition_failed
// (field status) for a terminated agent given another status (terminated
// is final).
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
			rows, err := tx.Query(ctx, sqlAgentEndRuns, p.AgentID)
			if err != nil {
				return fmt.Errorf("end runs of agent %s: %w", p.AgentID, err)
			}
			runs, err := scanAll(rows, scanRun)
			if err != nil {
				return fmt.Errorf("end runs of agent %s: %w", p.AgentID, err)
			}
			if len(runs) > 0 {
				if err := releaseRunLocks(ctx, tx, p.Actor, clasp.RunCancelled, runs); err != nil {
					return err
				}
			}
		}
		a, err := scanAgent(tx.QueryRow(ctx, sqlAgentUpdate, args))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			cur, err := noRow(scanAgent(tx.QueryRow(ctx, sqlAgentGet, p.AgentID)))
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
		k, err := scanKey(s.pool.QueryRow(ctx, sqlKeyCreate, args))
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
// has no such key.
func (s *Store) AgentKeyRevoke(ctx context.Context, agentID, keyID string, actor store.Actor) (*clasp.APIKey, error) {
	args := actorArgs(namedArgs{"id": keyID, "agent": agentID}, actor)
	var out *clasp.APIKey
	err := s.retry(ctx, func() error {
		k, err := scanKey(s.pool.QueryRow(ctx, sqlKeyRevoke, args))
		if errors.Is(err, pgx.ErrNoRows) {
			k, err = scanKey(s.pool.QueryRow(ctx, sqlKeyGet, keyID, agentID))
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

// AgentKeyList lists an agent's keys, oldest first (never the secrets).
func (s *Store) AgentKeyList(ctx context.Context, agentID string) ([]*clasp.APIKey, error) {
	rows, err := s.pool.Query(ctx, sqlKeyList, agentID)
	if err != nil {
		return nil, translate(fmt.Errorf("list keys of agent %s: %w", agentID, err))
	}
	keys, err := scanAll(rows, scanKey)
	if err != nil {
		return nil, translate(fmt.Errorf("list keys of agent %s: %w", agentID, err))
	}
	return keys, nil
}

// AgentAuthenticate finds the agent owning the unrevoked key whose hash is
// tokenHash, and records the key's use (at most once a minute, by the
// database clock) in the same statement. 401 unauthenticated if there is
// none or the agent is terminated.
func (s *Store) AgentAuthenticate(ctx context.Context, tokenHash string) (*clasp.Agent, error) {
	var a *clasp.Agent
	err := s.retryQuiet(ctx, func() error {
		var err error
		a, err = scanAgent(s.pool.QueryRow(ctx, sqlKeyAuth, tokenHash))
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
	dest := append([]any{&keyID, &useDue}, agentDest(&a)...)
	dest = append(dest, &found)
	dest = append(dest, runDest(&r)...)
	err := s.pool.QueryRow(ctx, sqlKeyAuthRun, tokenHash, runID, minRenew.Microseconds()).Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && a.Status == clasp.AgentTerminated {
		return nil, nil, store.ErrUnauthenticated()
	}
	if err != nil {
		return nil, nil, translate(fmt.Errorf("authenticate agent key: %w", err))
	}
	if useDue {
		err := s.retryQuiet(ctx, func() error {
			_, err := s.pool.Exec(ctx, sqlKeyUsed, keyID)
			return err
		})
		if err != nil {
			return nil, nil, wrap(err, "record use of key %s", keyID)
		}
	}
	fixAgent(&a)
	if !found {
		return &a, nil, nil
	}
	fixRun(&r)
	return &a, &r, nil
}
