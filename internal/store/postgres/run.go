package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

var (
	// sqlRunOpen inserts a running run of an active agent with a lease of
	// @ttl_us µs from now (database clock), its issue (a reference in the
	// agent's company) when @issue_ref is set, records the agent's
	// heartbeat, writes run.started and records the Idempotency-Key if any
	// (CTE rec). No row when the agent is missing or terminated or the issue
	// is not found (the caller then explains).
	sqlRunOpen = `WITH a AS (
		SELECT id, company_id FROM agents WHERE id = @agent::text AND status <> 'terminated'
	), iss AS (
		SELECT i.id FROM issues i JOIN a ON i.company_id = a.company_id
		WHERE @issue_ref::text <> '' AND (i.id = @rid::text OR i.identifier = @rident::text)
	), made AS (
		INSERT INTO runs (id, company_id, agent_id, status, invocation_source, issue_id, attempt,
			lease_expires_at, last_sign_of_life_at, started_at, token_hash, created_at)
		SELECT @id::text, a.company_id, a.id, 'running', @source::text, (SELECT id FROM iss), 1,
			now() + @ttl_us::bigint * interval '1 microsecond', now(), now(), @token_hash::text, now()
		FROM a WHERE @issue_ref::text = '' OR EXISTS (SELECT 1 FROM iss)
		RETURNING ` + runCols + `
	), ` + sqlIdempotencyRecordCTE + `, hb AS (
		UPDATE agents SET last_heartbeat_at = now() WHERE id IN (SELECT agent_id FROM made)
	), act AS (` + sqlActivityInto + `
		SELECT made.company_id, ` + sqlActorCols + `, 'run.started', 'run', made.id,
			jsonb_build_object('agentId', made.agent_id, 'issueId', made.issue_id, 'invocationSource', made.invocation_source) FROM made
	)
	SELECT ` + runCols + ` FROM made`

	// sqlRunReopen is the replay of a RunOpen with an Idempotency-Key: the
	// recorded run, while live and holding the replay's token hash (the
	// token given out stays valid and is answered again), gets a lease
	// renewed as by a sign of life, with the agent's heartbeat. No row when
	// it is terminal or lost, or has another token hash.
	sqlRunReopen = `WITH upd AS (
		UPDATE runs r SET
			lease_expires_at = now() + @ttl_us::bigint * interval '1 microsecond',
			last_sign_of_life_at = now()
		WHERE r.id = @id::text AND r.token_hash IS NOT DISTINCT FROM @token_hash::text AND ` + sqlLive("r") + `
		RETURNING ` + qualify("r", runCols) + `
	), hb AS (
		UPDATE agents SET last_heartbeat_at = now() WHERE id IN (SELECT agent_id FROM upd)
	)
	SELECT * FROM upd`
	sqlRunGet = `SELECT ` + runCols + ` FROM runs WHERE id = $1`

	// sqlRunAuth finds the run whose token has a hash, whether it is live
	// (database clock), and its agent.
	sqlRunAuth = `SELECT ` + qualify("r", runCols) + `, ` + sqlLive("r") + `, ` + qualifyAgent + `
	FROM runs r JOIN agents a ON a.id = r.agent_id WHERE r.token_hash = $1`

	// sqlRunTouch: a live run's sign of life renews its lease to @ttl_us µs
	// from now and records the agent's heartbeat, one conditional write (a
	// run that is terminal or lost is not revived). Unless @force, the
	// write is skipped when the last sign of life is less than @min_us µs
	// old. The answer is the renewed run (renewed true), or else the run as
	// it stands with its state, for the caller to explain.
	sqlRunTouch = `WITH cur AS (
		SELECT ` + qualify("r", runCols) + `, ` + runState("r") + ` AS state FROM runs r WHERE r.id = @run::text
	), upd AS (
		UPDATE runs r SET
			lease_expires_at = now() + @ttl_us::bigint * interval '1 microsecond',
			last_sign_of_life_at = now()
		WHERE r.id = @run::text AND r.agent_id = @agent::text AND ` + sqlLive("r") + `
			AND (@force::boolean OR r.last_sign_of_life_at IS NULL
				OR r.last_sign_of_life_at <= now() - @min_us::bigint * interval '1 microsecond')
		RETURNING ` + qualify("r", runCols) + `
	), hb AS (
		UPDATE agents SET last_heartbeat_at = now() WHERE id IN (SELECT agent_id FROM upd)
	)
	SELECT upd.*, true, 'live' FROM upd
	UNION ALL
	SELECT ` + qualify("cur", runCols) + `, false, cur.state FROM cur WHERE NOT EXISTS (SELECT 1 FROM upd)`
)

// RunOpen opens a running run of agent AgentID with a lease of LeaseTTL
// (default 60 s) from now (database clock), and records the run token's
// hash, p.TokenHashOf(the new run's id). IssueID, when set, is a UUID or
// identifier of an issue of the agent's company. With Idempotency, a repeat
// opens nothing and keeps the recorded run's token hash: while the run is
// live and its hash is p.TokenHashOf(its id), its lease is renewed and it
// is returned; with another hash, 422 idempotency_key_reused
// (store.ErrRunReplayOtherToken); once it is terminal or lost, 409
// run_not_live. Errors: 403 forbidden (the actor is another agent, or the
// agent is terminated), 404 not_found (agent, or issue of its company), 422
// idempotency_key_reused.
func (s *Store) RunOpen(ctx context.Context, p *store.RunOpenParams) (*clasp.Run, error) {
	ttl, source, err := p.Check()
	if err != nil {
		return nil, err
	}
	rid, rident := splitRef(p.IssueID)
	newID := s.newID()
	args := actorArgs(namedArgs{"id": newID, "agent": p.AgentID, "issue_ref": p.IssueID, "rid": rid, "rident": rident,
		"source": source, "ttl_us": ttl.Microseconds(),
		"token_hash": nullable(p.TokenHashOf(newID))}, p.Actor)
	idemArgs(args, p.Idempotency, idemRun)
	replay := func(id string) (*clasp.Run, error) {
		var out *clasp.Run
		err := s.retry(ctx, func() error {
			var err error
			out, err = scanRun(s.pool.QueryRow(ctx, sqlRunReopen, namedArgs{"id": id, "token_hash": nullable(p.TokenHashOf(id)),
				"ttl_us": ttl.Microseconds()}))
			return err
		})
		if isNotFound(err) {
			var owner, state string
			err := s.pool.QueryRow(ctx, `SELECT r.agent_id, `+runState("r")+` FROM runs r WHERE r.id = $1`, id).Scan(&owner, &state)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return nil, translate(fmt.Errorf("read run %s: %w", id, err))
			}
			return nil, store.RunReplayRefusal(id, p.AgentID, err == nil, owner, state)
		}
		return out, wrap(err, "reopen run %s", id)
	}
	return idempotent(ctx, s, p.Idempotency, idemRun, replay, func() (*clasp.Run, error) {
		var out *clasp.Run
		err := s.retry(ctx, func() error {
			r, err := scanRun(s.pool.QueryRow(ctx, sqlRunOpen, args))
			if errors.Is(err, pgx.ErrNoRows) {
				return s.runOpenRefused(ctx, p)
			}
			out = r
			return wrap(err, "open run of agent %s", p.AgentID)
		})
		if err != nil {
			return nil, err
		}
		return out, nil
	})
}

// runOpenRefused explains a RunOpen that inserted nothing.
func (s *Store) runOpenRefused(ctx context.Context, p *store.RunOpenParams) error {
	a, err := s.AgentGet(ctx, p.AgentID)
	if err != nil {
		return err
	}
	if a.Status == clasp.AgentTerminated {
		return store.ErrAgentTerminated(a.ID)
	}
	return notFound("issue", p.IssueID)
}

// RunGet returns a run; 404 not_found.
func (s *Store) RunGet(ctx context.Context, id string) (*clasp.Run, error) {
	r, err := scanRun(s.pool.QueryRow(ctx, sqlRunGet, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound("run", id)
	}
	if err != nil {
		return nil, translate(fmt.Errorf("get run %s: %w", id, err))
	}
	return r, nil
}

// RunList lists runs of a company, newest first, narrowed to statuses and
// an agent when set.
func (s *Store) RunList(ctx context.Context, p *store.RunListParams) ([]*clasp.Run, string, error) {
	where, args := []string{"company_id = ?"}, []any{p.CompanyID}
	if len(p.Statuses) > 0 {
		st := make([]string, len(p.Statuses))
		for i, v := range p.Statuses {
			st[i] = string(v)
		}
		where, args = append(where, "status = ANY(?::text[])"), append(args, st)
	}
	if p.AgentID != "" {
		where, args = append(where, "agent_id = ?"), append(args, p.AgentID)
	}
	return listPage(ctx, s, "runs", runCols, where, args, p.Page, false, scanRun,
		func(r *clasp.Run) string { return encodeCursor(r.CreatedAt, r.ID) })
}

// RunTouch checks that run RunID exists (else 422 run_not_found), is
// AgentID's (else 403 run_not_owned) and is live (else 409 run_not_live),
// and renews its lease to now + LeaseTTL with the agent's heartbeat, all
// by the database clock in one statement. Unless Force, the write is
// skipped when the last sign of life is less than MinRenewInterval old.
func (s *Store) RunTouch(ctx context.Context, p *store.RunTouchParams) (*clasp.Run, error) {
	args := namedArgs{"run": p.RunID, "agent": p.AgentID, "ttl_us": p.TTL().Microseconds(),
		"force": p.Force || p.MinRenewInterval <= 0, "min_us": p.MinRenewInterval.Microseconds()}
	var (
		r       clasp.Run
		renewed bool
		state   string
	)
	err := s.retryQuiet(ctx, func() error { // a lease renewal writes no activity
		return s.pool.QueryRow(ctx, sqlRunTouch, args).Scan(append(runDest(&r), &renewed, &state)...)
	})
	found := !isNotFound(err)
	if err != nil && found {
		return nil, wrap(err, "renew lease of run %s", p.RunID)
	}
	if !renewed {
		if err := store.RunTouchRefusal(p.RunID, p.AgentID, found, r.AgentID, state); err != nil {
			return nil, err
		}
	}
	fixRun(&r)
	return &r, nil
}

// RunAuthenticate finds the live run (database clock) whose run token
// hashes to tokenHash, and its agent. 401 unauthenticated if the token is
// unknown, the run is not live, or the agent is terminated.
func (s *Store) RunAuthenticate(ctx context.Context, tokenHash string) (*clasp.Agent, *clasp.Run, error) {
	if tokenHash == "" {
		return nil, nil, store.ErrUnauthenticated()
	}
	var (
		r    clasp.Run
		a    clasp.Agent
		live bool
	)
	dest := append(runDest(&r), &live)
	err := s.pool.QueryRow(ctx, sqlRunAuth, tokenHash).Scan(append(dest, agentDest(&a)...)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, store.ErrUnauthenticated()
	}
	if err != nil {
		return nil, nil, translate(fmt.Errorf("authenticate run token: %w", err))
	}
	if !live || a.Status == clasp.AgentTerminated {
		return nil, nil, store.ErrUnauthenticated()
	}
	fixRun(&r)
	fixAgent(&a)
	return &a, &r, nil
}
