package postgres

// Server-managed agents (issue 4) on PostgreSQL: adapter configs, wake
// requests, and the life cycle of the runs the heartbeat scheduler starts.
// Each rule's decision is one conditional statement; the wakes of one agent
// are serialised by a transaction advisory lock on the agent (coalescing
// and idempotency keys across replicas), and a loss's retry is unique by
// retry_of_run_id.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

var _ store.HeartbeatStore = (*Store)(nil)

var (
	// hbTakeExecution: a run queued for an issue takes its execution lock
	// when the issue is its agent's or unassigned and not done or cancelled
	// (store.WakeIssueRefusal, checked first for the error's reason), and
	// both lock columns are empty or name dead runs; a dead checkout lock is
	// cleared in the same write (seed 004), so L7 holds.
	hbTakeExecution = `UPDATE issues i SET
		execution_run_id = @run::text,
		execution_agent_name_key = (SELECT a.name_key FROM agents a WHERE a.id = @agent::text),
		execution_locked_at = now(),
		checkout_run_id = NULL,
		updated_at = now()
	WHERE i.id = @issue::text
		AND i.status NOT IN ('done', 'cancelled')
		AND (i.assignee_agent_id IS NULL OR i.assignee_agent_id = @agent::text)
		AND (i.execution_run_id IS NULL OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = i.execution_run_id AND ` + sqlLive("r") + `))
		AND (i.checkout_run_id IS NULL OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = i.checkout_run_id AND ` + sqlLive("r") + `))`

	hbRunInsert = `INSERT INTO runs (id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id,
		attempt, managed, created_at)
	VALUES (@id::text, @company::text, @agent::text, 'queued', @source::text, @issue::text, @retry_of::text, @attempt::integer, true, clock_timestamp())
	ON CONFLICT DO NOTHING
	RETURNING ` + runCols

	hbRunStart = `UPDATE runs r SET
		status = 'running', host_id = @host::text, token_hash = @hash::text, started_at = now(),
		lease_expires_at = now() + @ttl_us::bigint * interval '1 microsecond', last_sign_of_life_at = now()
	WHERE r.id = @run::text AND r.status = 'queued'
		AND EXISTS (SELECT 1 FROM agents a WHERE a.id = r.agent_id AND a.status = 'active')
		AND (SELECT count(*) FROM runs r2 WHERE r2.agent_id = r.agent_id AND r2.status = 'running'
			AND r2.lease_expires_at > now()) < @max::integer
	RETURNING ` + qualify("r", runCols)

	// hbProcessLost is the process-loss rule in ONE statement: the running
	// managed run of @host becomes failed (process_lost); if it is attempt 1
	// and not retried yet, its retry is queued (attempt 2) for the issue
	// whose execution lock the lost run holds (its own issue if it still
	// holds that lock, else the one it locked last; without any, its own
	// issue), and that issue's execution lock moves to the retry while its
	// checkout lock (the lost run's) is cleared (seed 004). Other locks
	// naming the lost run are released afterwards (L6).
	hbProcessLost = `WITH lost AS (
		UPDATE runs SET status = 'failed', error_code = 'process_lost', error = @error::text, finished_at = now()
		WHERE id = @run::text AND status = 'running' AND managed AND host_id = @host::text
		RETURNING ` + runCols + `
	), held AS (
		SELECT i.id FROM issues i, lost WHERE i.execution_run_id = @run::text
		ORDER BY (i.id = lost.issue_id) DESC NULLS LAST, i.execution_locked_at DESC, i.id LIMIT 1
	), retry AS (
		INSERT INTO runs (id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, managed, created_at)
		SELECT @retry_id::text, company_id, agent_id, 'queued', 'retry', coalesce((SELECT id FROM held), issue_id), id, 2, true, clock_timestamp()
		FROM lost WHERE attempt = 1 AND retry_of_run_id IS NULL
		ON CONFLICT DO NOTHING
		RETURNING ` + runCols + `
	), moved AS (
		UPDATE issues i SET
			execution_run_id = (SELECT id FROM retry),
			execution_locked_at = now(),
			checkout_run_id = CASE WHEN i.checkout_run_id = @run::text THEN NULL ELSE i.checkout_run_id END,
			updated_at = now()
		WHERE i.id = (SELECT id FROM held) AND i.execution_run_id = @run::text AND EXISTS (SELECT 1 FROM retry)
		RETURNING i.id, i.company_id
	)
	SELECT (SELECT row_to_json(lost) FROM lost), (SELECT row_to_json(retry) FROM retry),
		(SELECT coalesce(json_agg(json_build_array(id, company_id)), '[]') FROM moved)`

	hbManagedCols = runCols + `, coalesce(proc_start, 0)`
)

// lockAgent serialises the heartbeat writes of one agent across replicas.
func lockAgent(ctx context.Context, tx pgx.Tx, agentID string) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('clasp.agent:' || $1, 0))`, agentID)
	return wrap(err, "lock agent %s", agentID)
}

// extraScan scans a row's leading columns with the wrapped scan function's
// destinations and its trailing ones into extra.
type extraScan struct {
	sc    scanner
	extra []any
}

func (e extraScan) Scan(dest ...any) error { return e.sc.Scan(append(dest, e.extra...)...) }

func scanManaged(sc scanner) (*store.ManagedRun, error) {
	var m store.ManagedRun
	r, err := scanRun(extraScan{sc, []any{&m.ProcStart}})
	if err != nil {
		return nil, err
	}
	m.Run, m.WakeReason = r, r.InvocationSource
	return &m, nil
}

func parseAdapter(raw *string) (*clasp.AdapterConfig, error) {
	if raw == nil {
		return nil, nil
	}
	var c clasp.AdapterConfig
	if err := json.Unmarshal([]byte(*raw), &c); err != nil {
		return nil, fmt.Errorf("adapter config: %w", err)
	}
	return &c, nil
}

// AgentAdapterSet stores (Config nil: removes) an agent's adapter config.
func (s *Store) AgentAdapterSet(ctx context.Context, p *store.AgentAdapterSetParams) (*clasp.AdapterConfig, error) {
	var cfg *string
	typ := ""
	if p.Config != nil {
		if err := p.Config.Normalize(); err != nil {
			return nil, err
		}
		b, err := json.Marshal(p.Config)
		if err != nil {
			return nil, err
		}
		cfg, typ = nullable(string(b)), p.Config.Type
	}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var company string
		err := tx.QueryRow(ctx, `UPDATE agents SET adapter_config = $1 WHERE id = $2 AND status <> 'terminated' RETURNING company_id`,
			cfg, p.AgentID).Scan(&company)
		if errors.Is(err, pgx.ErrNoRows) {
			a, err := scanAgent(tx.QueryRow(ctx, sqlAgentGet, p.AgentID))
			if errors.Is(err, pgx.ErrNoRows) {
				return notFound("agent", p.AgentID)
			}
			if err != nil {
				return err
			}
			return clasp.Errorf(clasp.CodePreconditionFailed, "Agent %s is terminated: its adapter cannot change.", a.ID)
		}
		if err != nil {
			return fmt.Errorf("set adapter of agent %s: %w", p.AgentID, err)
		}
		return logActivity(ctx, tx, company, p.Actor, clasp.ActionAgentAdapterSet, "agent", p.AgentID, map[string]any{"adapterType": typ})
	})
	if err != nil {
		return nil, err
	}
	return p.Config, nil
}

// AgentAdapterGet returns an agent's adapter config, nil when it has none. 404 not_found.
func (s *Store) AgentAdapterGet(ctx context.Context, agentID string) (*clasp.AdapterConfig, error) {
	var raw *string
	err := s.pool.QueryRow(ctx, `SELECT adapter_config FROM agents WHERE id = $1`, agentID).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound("agent", agentID)
	}
	if err != nil {
		return nil, translate(fmt.Errorf("get adapter of agent %s: %w", agentID, err))
	}
	return parseAdapter(raw)
}

// AgentAdapterList returns every non-terminated agent with an adapter config.
func (s *Store) AgentAdapterList(ctx context.Context) ([]*store.AgentAdapter, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+agentCols+`, adapter_config FROM agents
		WHERE adapter_config IS NOT NULL AND status <> 'terminated' ORDER BY created_at, id`)
	if err != nil {
		return nil, translate(fmt.Errorf("list adapters: %w", err))
	}
	defer rows.Close()
	var out []*store.AgentAdapter
	for rows.Next() {
		var raw *string
		a, err := scanAgent(extraScan{rows, []any{&raw}})
		if err != nil {
			return nil, fmt.Errorf("list adapters: %w", err)
		}
		c, err := parseAdapter(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, &store.AgentAdapter{Agent: a, Config: c})
	}
	return out, translate(rows.Err())
}

func adapterOf(ctx context.Context, tx pgx.Tx, agentID string) (*clasp.Agent, *clasp.AdapterConfig, error) {
	var raw *string
	a, err := scanAgent(extraScan{tx.QueryRow(ctx, `SELECT `+agentCols+`, adapter_config FROM agents WHERE id = $1`, agentID), []any{&raw}})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, notFound("agent", agentID)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("get agent %s: %w", agentID, err)
	}
	c, err := parseAdapter(raw)
	return a, c, err
}

// Wake records a wake request and acts on it (store.WakeParams).
func (s *Store) Wake(ctx context.Context, p *store.WakeParams) (*store.WakeResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var out *store.WakeResult
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = wake(ctx, tx, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func wake(ctx context.Context, tx pgx.Tx, p *store.WakeParams) (*store.WakeResult, error) {
	if err := lockAgent(ctx, tx, p.AgentID); err != nil {
		return nil, err
	}
	if p.IdempotencyKey != "" {
		var id, status string
		var runID, blocked, hash *string
		var company string
		err := tx.QueryRow(ctx, `SELECT id, status, run_id, blocked_by_run_id, request_hash, company_id FROM wake_requests WHERE agent_id = $1 AND idempotency_key = $2`,
			p.AgentID, p.IdempotencyKey).Scan(&id, &status, &runID, &blocked, &hash, &company)
		if err == nil && hash != nil {
			// The same request names the same issue (by UUID or
			// identifier); a missing issue is another request.
			issueID := ""
			if p.IssueID != "" {
				rid, rident := splitRef(p.IssueID)
				if err := tx.QueryRow(ctx, `SELECT i.id FROM issues i WHERE `+sqlIssueRef,
					namedArgs{"rid": rid, "rident": rident, "company": company}).Scan(&issueID); err != nil && !errors.Is(err, pgx.ErrNoRows) {
					return nil, fmt.Errorf("find issue %s: %w", p.IssueID, err)
				} else if err != nil {
					issueID = "missing:" + p.IssueID
				}
			}
			if *hash != store.WakeRequestHash(p.Reason, issueID) {
				return nil, store.ErrWakeKeyReused(p.IdempotencyKey)
			}
		}
		if err == nil {
			res := &store.WakeResult{WakeID: id, Outcome: status, BlockedByRunID: blocked, Replayed: true}
			if runID != nil {
				if res.Run, err = scanRun(tx.QueryRow(ctx, `SELECT `+runCols+` FROM runs WHERE id = $1`, *runID)); err != nil {
					return nil, fmt.Errorf("get run %s: %w", *runID, err)
				}
			}
			return res, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("find wake: %w", err)
		}
	}
	a, cfg, err := adapterOf(ctx, tx, p.AgentID)
	if err != nil {
		return nil, err
	}
	if p.Actor.Type == clasp.ActorAgent && p.Actor.CompanyID != a.CompanyID {
		return nil, notFound("agent", p.AgentID)
	}
	issueID := ""
	if p.IssueID != "" {
		rid, rident := splitRef(p.IssueID)
		err := tx.QueryRow(ctx, `SELECT i.id FROM issues i WHERE `+sqlIssueRef,
			namedArgs{"rid": rid, "rident": rident, "company": a.CompanyID}).Scan(&issueID)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, notFound("issue", p.IssueID)
		}
		if err != nil {
			return nil, fmt.Errorf("find issue %s: %w", p.IssueID, err)
		}
		if err := wakeRefusal(ctx, tx, a.ID, issueID); err != nil {
			return nil, err
		}
	}
	res := &store.WakeResult{WakeID: newUUIDv7()}
	if a.Status != clasp.AgentActive || cfg == nil {
		res.Outcome = store.WakeSkipped
	} else {
		if res.Run, err = queuedRunFor(ctx, tx, a.ID, issueID); err != nil {
			return nil, err
		}
		if res.Run != nil {
			res.Outcome = store.WakeCoalesced
		} else {
			var blocked string
			if res.Run, blocked, err = queueRun(ctx, tx, a, issueID, p.Reason, "", 1, p.Actor); err != nil {
				return nil, err
			}
			if res.Run != nil {
				res.Outcome = store.WakeQueued
			} else {
				res.Outcome, res.BlockedByRunID = store.WakeDeferred, &blocked
			}
		}
	}
	var runID *string
	if res.Run != nil {
		runID = &res.Run.ID
	}
	var hash *string
	if p.IdempotencyKey != "" {
		h := store.WakeRequestHash(p.Reason, issueID)
		hash = &h
	}
	if _, err := tx.Exec(ctx, `INSERT INTO wake_requests (id, company_id, agent_id, issue_id, reason, idempotency_key,
		status, run_id, blocked_by_run_id, request_hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		res.WakeID, a.CompanyID, a.ID, nullable(issueID), p.Reason, nullable(p.IdempotencyKey), res.Outcome, runID,
		res.BlockedByRunID, hash); err != nil {
		return nil, fmt.Errorf("record wake of agent %s: %w", a.ID, err)
	}
	return res, logActivity(ctx, tx, a.CompanyID, p.Actor, clasp.ActionWakeRequested, "agent", a.ID, map[string]any{
		"wakeId": res.WakeID, "reason": p.Reason, "issueId": nullable(issueID), "outcome": res.Outcome,
		"runId": runID, "blockedByRunId": res.BlockedByRunID,
	})
}

// wakeRefusal locks issue issueID's row (FOR UPDATE, so that no
// reassignment or close lands before the wake's lock write) and returns
// store.WakeIssueRefusal's answer for waking agentID for it (nil: it may
// be woken), or the read's error.
func wakeRefusal(ctx context.Context, tx pgx.Tx, agentID, issueID string) error {
	var status string
	var assignee, checkout, execution *string
	if err := tx.QueryRow(ctx, `SELECT status, assignee_agent_id, checkout_run_id, execution_run_id FROM issues WHERE id = $1 FOR UPDATE`, issueID).
		Scan(&status, &assignee, &checkout, &execution); err != nil {
		return fmt.Errorf("read issue %s: %w", issueID, err)
	}
	return store.WakeIssueRefusal(agentID, issueID, clasp.IssueStatus(status), assignee, checkout, execution)
}

func queuedRunFor(ctx context.Context, tx pgx.Tx, agentID, issueID string) (*clasp.Run, error) {
	r, err := scanRun(tx.QueryRow(ctx, `SELECT `+runCols+` FROM runs WHERE agent_id = $1 AND status = 'queued' AND managed
		AND issue_id IS NOT DISTINCT FROM $2 ORDER BY created_at LIMIT 1`, agentID, nullable(issueID)))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find queued run of agent %s: %w", agentID, err)
	}
	return r, nil
}

// queueRun queues a managed run of agent a for issueID ("" none); see the
// SQLite store's queueRun. A retry (retryOf set) takes no lock here: the
// process-loss statement moves it.
func queueRun(ctx context.Context, tx pgx.Tx, a *clasp.Agent, issueID, reason, retryOf string, attempt int, actor store.Actor) (*clasp.Run, string, error) {
	id := newUUIDv7()
	var prevCheckout, prevExecution *string
	takeLock := issueID != "" && retryOf == ""
	if takeLock {
		if err := tx.QueryRow(ctx, `SELECT checkout_run_id, execution_run_id FROM issues WHERE id = $1 FOR UPDATE`, issueID).
			Scan(&prevCheckout, &prevExecution); err != nil {
			return nil, "", fmt.Errorf("read issue %s: %w", issueID, err)
		}
		tag, err := tx.Exec(ctx, hbTakeExecution, namedArgs{"run": id, "agent": a.ID, "issue": issueID})
		if err != nil {
			return nil, "", fmt.Errorf("take execution lock of issue %s: %w", issueID, err)
		}
		if tag.RowsAffected() == 0 {
			b := prevExecution
			if b == nil {
				b = prevCheckout
			}
			if b == nil {
				return nil, "", fmt.Errorf("take execution lock of issue %s: refused with no holder", issueID)
			}
			return nil, *b, nil
		}
	}
	run, err := scanRun(tx.QueryRow(ctx, hbRunInsert, namedArgs{"id": id, "company": a.CompanyID, "agent": a.ID,
		"source": reason, "issue": nullable(issueID), "retry_of": nullable(retryOf), "attempt": attempt}))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("queue run of agent %s: %w", a.ID, err)
	}
	if err := logActivity(ctx, tx, a.CompanyID, actor, clasp.ActionRunQueued, "run", run.ID, map[string]any{
		"agentId": a.ID, "issueId": run.IssueID, "reason": reason, "retryOfRunId": run.RetryOfRunID, "attempt": run.Attempt,
	}); err != nil {
		return nil, "", err
	}
	if takeLock {
		if err := logActivity(ctx, tx, a.CompanyID, actor, clasp.ActionIssueExecutionLocked, "issue", issueID, map[string]any{
			"runId": run.ID, "previousCheckoutRunId": prevCheckout, "previousExecutionRunId": prevExecution,
		}); err != nil {
			return nil, "", err
		}
	}
	return run, "", nil
}

// promoteBlockedBy promotes the deferred wakes that waited for runs ids,
// oldest first (see the SQLite store's promoteBlockedBy). Part of rule L6:
// it runs in the transaction that ended the runs.
func promoteBlockedBy(ctx context.Context, tx pgx.Tx, ids []string) error {
	rows, err := tx.Query(ctx, `SELECT id, company_id, agent_id, coalesce(issue_id, ''), reason, blocked_by_run_id FROM wake_requests
		WHERE status = 'deferred' AND blocked_by_run_id = ANY($1) ORDER BY created_at, id FOR UPDATE`, ids)
	if err != nil {
		return fmt.Errorf("find deferred wakes: %w", err)
	}
	type wake struct{ id, company, agent, issue, reason, ended string }
	var ws []wake
	for rows.Next() {
		var w wake
		if err := rows.Scan(&w.id, &w.company, &w.agent, &w.issue, &w.reason, &w.ended); err != nil {
			rows.Close()
			return fmt.Errorf("find deferred wakes: %w", err)
		}
		ws = append(ws, w)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("find deferred wakes: %w", err)
	}
	for _, w := range ws {
		if err := lockAgent(ctx, tx, w.agent); err != nil {
			return err
		}
		a, cfg, err := adapterOf(ctx, tx, w.agent)
		if err != nil {
			return err
		}
		allowed := true // the issue may have been reassigned or closed while the wake waited
		if w.issue != "" {
			refusal := wakeRefusal(ctx, tx, a.ID, w.issue)
			var ce *clasp.Error
			if refusal != nil && !errors.As(refusal, &ce) {
				return refusal
			}
			allowed = refusal == nil
		}
		status, blocked := store.WakeSkipped, ""
		var run *clasp.Run
		if a.Status == clasp.AgentActive && cfg != nil && allowed {
			if run, err = queuedRunFor(ctx, tx, a.ID, w.issue); err != nil {
				return err
			}
			status = store.WakeCoalesced
			if run == nil {
				if run, blocked, err = queueRun(ctx, tx, a, w.issue, w.reason, "", 1, store.Actor{Type: clasp.ActorSystem}); err != nil {
					return err
				}
				status = store.WakeQueued
				if run == nil {
					status = store.WakeDeferred
				}
			}
		}
		var rid *string
		if run != nil {
			rid = &run.ID
		}
		if _, err := tx.Exec(ctx, `UPDATE wake_requests SET status = $1, run_id = $2, blocked_by_run_id = $3, updated_at = now()
			WHERE id = $4 AND status = 'deferred'`, status, rid, nullable(blocked), w.id); err != nil {
			return fmt.Errorf("promote wake %s: %w", w.id, err)
		}
		if status != store.WakeDeferred {
			if err := logActivity(ctx, tx, w.company, store.Actor{Type: clasp.ActorSystem}, clasp.ActionWakePromoted, "agent", w.agent, map[string]any{
				"wakeId": w.id, "runId": rid, "issueId": nullable(w.issue), "endedRunId": w.ended, "outcome": status,
			}); err != nil {
				return err
			}
		}
	}
	return nil
}

// WakePromoteDeferred promotes the deferred wakes whose blocking run is dead.
func (s *Store) WakePromoteDeferred(ctx context.Context) (int, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT w.blocked_by_run_id FROM wake_requests w
		WHERE w.status = 'deferred' AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = w.blocked_by_run_id AND `+sqlLive("r")+`)`)
	if err != nil {
		return 0, translate(fmt.Errorf("find deferred wakes: %w", err))
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(ids) == 0 {
		return 0, translate(err)
	}
	n := 0
	err = s.tx(ctx, func(tx pgx.Tx) error {
		var before, after int
		q := `SELECT count(*) FROM wake_requests WHERE status = 'deferred' AND blocked_by_run_id = ANY($1)`
		// Re-checked inside the transaction: only runs that are still dead.
		rows, err := tx.Query(ctx, `SELECT id FROM unnest($1::text[]) AS u(id) WHERE NOT EXISTS
			(SELECT 1 FROM runs r WHERE r.id = u.id AND `+sqlLive("r")+`)`, ids)
		if err != nil {
			return err
		}
		dead, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, q, dead).Scan(&before); err != nil {
			return err
		}
		if err := promoteBlockedBy(ctx, tx, dead); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, q, dead).Scan(&after); err != nil {
			return err
		}
		n = before - after
		return nil
	})
	return n, err
}

// RunQueuedManaged lists queued managed runs of active agents with an adapter, oldest first.
func (s *Store) RunQueuedManaged(ctx context.Context, limit int) ([]*store.ManagedRun, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+hbManagedCols+` FROM runs WHERE status = 'queued' AND managed
		AND agent_id IN (SELECT id FROM agents WHERE status = 'active' AND adapter_config IS NOT NULL)
		ORDER BY created_at, id LIMIT $1`, pageLimit(limit))
	if err != nil {
		return nil, translate(fmt.Errorf("list queued runs: %w", err))
	}
	return scanAll(rows, scanManaged)
}

// RunRunningOnHost lists the running managed runs of hostID.
func (s *Store) RunRunningOnHost(ctx context.Context, hostID string) ([]*store.ManagedRun, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+hbManagedCols+` FROM runs WHERE status = 'running' AND managed
		AND host_id = $1 ORDER BY created_at, id`, hostID)
	if err != nil {
		return nil, translate(fmt.Errorf("list running runs of host %s: %w", hostID, err))
	}
	return scanAll(rows, scanManaged)
}

// RunStart starts a queued run (store.HeartbeatStore.RunStart).
func (s *Store) RunStart(ctx context.Context, p *store.RunStartParams) (*clasp.Run, error) {
	ttl := p.LeaseTTL
	if ttl <= 0 {
		ttl = defaultLeaseTTL
	}
	var out *clasp.Run
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var agentID string
		err := tx.QueryRow(ctx, `SELECT agent_id FROM runs WHERE id = $1`, p.RunID).Scan(&agentID)
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound("run", p.RunID)
		}
		if err != nil {
			return err
		}
		if err := lockAgent(ctx, tx, agentID); err != nil { // the slot count, across replicas
			return err
		}
		r, err := scanRun(tx.QueryRow(ctx, hbRunStart, namedArgs{"run": p.RunID, "host": p.HostID, "hash": nullable(p.TokenHash),
			"ttl_us": ttl.Microseconds(), "max": max(p.MaxRunning, 1)}))
		if errors.Is(err, pgx.ErrNoRows) {
			cur, err := scanRun(tx.QueryRow(ctx, `SELECT `+runCols+` FROM runs WHERE id = $1`, p.RunID))
			if err != nil {
				return err
			}
			if cur.Status != clasp.RunQueued {
				return clasp.Errorf(clasp.CodeRunNotLive, "Run %s is %s, not queued.", cur.ID, cur.Status).WithDetails("runId", cur.ID)
			}
			a, _, err := adapterOf(ctx, tx, cur.AgentID)
			if err != nil {
				return err
			}
			reason := "no_free_slot"
			if a.Status != clasp.AgentActive {
				reason = "agent_not_active"
			}
			return clasp.Errorf(clasp.CodePreconditionFailed, "Run %s cannot start now (%s).", cur.ID, reason).
				WithDetails("runId", cur.ID, "reason", reason)
		}
		if err != nil {
			return fmt.Errorf("start run %s: %w", p.RunID, err)
		}
		out = r
		if _, err := tx.Exec(ctx, `UPDATE agents SET last_heartbeat_at = now() WHERE id = $1`, r.AgentID); err != nil {
			return err
		}
		return logActivity(ctx, tx, r.CompanyID, store.Actor{Type: clasp.ActorSystem}, clasp.ActionRunStarted, "run", r.ID, map[string]any{
			"agentId": r.AgentID, "issueId": r.IssueID, "invocationSource": r.InvocationSource, "hostId": p.HostID,
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RunSetProcess records the pid and process start time of a running run of hostID.
func (s *Store) RunSetProcess(ctx context.Context, runID, hostID string, pid int, procStart int64) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE runs SET pid = $1, proc_start = $2 WHERE id = $3 AND host_id = $4 AND status = 'running'`,
			pid, procStart, runID, hostID)
		if err != nil {
			return fmt.Errorf("record process of run %s: %w", runID, err)
		}
		if tag.RowsAffected() == 0 {
			return clasp.Errorf(clasp.CodeRunNotLive, "Run %s is not running on this host.", runID).WithDetails("runId", runID)
		}
		return nil
	})
}

// RunRenew renews the lease of a live running run of hostID. 409 run_not_live.
func (s *Store) RunRenew(ctx context.Context, runID, hostID string, ttl time.Duration) error {
	if ttl <= 0 {
		ttl = defaultLeaseTTL
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE runs SET lease_expires_at = now() + $1::bigint * interval '1 microsecond',
			last_sign_of_life_at = now() WHERE id = $2 AND host_id = $3 AND status = 'running' AND lease_expires_at > now()`,
			ttl.Microseconds(), runID, hostID)
		if err != nil {
			return fmt.Errorf("renew run %s: %w", runID, err)
		}
		if tag.RowsAffected() == 0 {
			return clasp.Errorf(clasp.CodeRunNotLive, "Run %s is not live on this host.", runID).WithDetails("runId", runID)
		}
		return nil
	})
}

// jsonRun is a runs row as row_to_json writes it.
type jsonRun struct {
	ID               string     `json:"id"`
	CompanyID        string     `json:"company_id"`
	AgentID          string     `json:"agent_id"`
	Status           string     `json:"status"`
	InvocationSource string     `json:"invocation_source"`
	IssueID          *string    `json:"issue_id"`
	RetryOfRunID     *string    `json:"retry_of_run_id"`
	Attempt          int        `json:"attempt"`
	PID              *int       `json:"pid"`
	HostID           *string    `json:"host_id"`
	LeaseExpiresAt   *time.Time `json:"lease_expires_at"`
	LastSignOfLifeAt *time.Time `json:"last_sign_of_life_at"`
	StartedAt        *time.Time `json:"started_at"`
	FinishedAt       *time.Time `json:"finished_at"`
	ExitCode         *int       `json:"exit_code"`
	ErrorCode        *string    `json:"error_code"`
	Error            *string    `json:"error"`
	CreatedAt        time.Time  `json:"created_at"`
}

func (j *jsonRun) run() *clasp.Run {
	r := &clasp.Run{ID: j.ID, CompanyID: j.CompanyID, AgentID: j.AgentID, Status: clasp.RunStatus(j.Status),
		InvocationSource: j.InvocationSource, IssueID: j.IssueID, RetryOfRunID: j.RetryOfRunID, Attempt: j.Attempt,
		PID: j.PID, HostID: j.HostID, LeaseExpiresAt: j.LeaseExpiresAt, LastSignOfLifeAt: j.LastSignOfLifeAt,
		StartedAt: j.StartedAt, FinishedAt: j.FinishedAt, ExitCode: j.ExitCode, ErrorCode: j.ErrorCode, Error: j.Error,
		CreatedAt: j.CreatedAt}
	fixRun(r)
	return r
}

// RunProcessLost fails a run whose process is gone and queues its one
// retry, moving the execution lock and clearing the dead checkout lock in
// the same statement (hbProcessLost).
func (s *Store) RunProcessLost(ctx context.Context, p *store.RunProcessLostParams) (failed, retry *clasp.Run, err error) {
	msg := p.Error
	if msg == "" {
		msg = "process lost: the run's process is gone"
	}
	system := store.Actor{Type: clasp.ActorSystem}
	err = s.tx(ctx, func(tx pgx.Tx) error {
		failed, retry = nil, nil
		var lostJSON, retryJSON []byte
		var movedJSON []byte
		if err := tx.QueryRow(ctx, hbProcessLost, namedArgs{"run": p.RunID, "host": p.HostID, "error": msg,
			"retry_id": newUUIDv7()}).Scan(&lostJSON, &retryJSON, &movedJSON); err != nil {
			return fmt.Errorf("process lost of run %s: %w", p.RunID, err)
		}
		if lostJSON == nil {
			return clasp.Errorf(clasp.CodeRunNotLive, "Run %s is not a running managed run of this host.", p.RunID).
				WithDetails("runId", p.RunID)
		}
		var lj, rj jsonRun
		if err := json.Unmarshal(lostJSON, &lj); err != nil {
			return err
		}
		failed = lj.run()
		if err := logActivity(ctx, tx, failed.CompanyID, system, clasp.ActionRunLost, "run", failed.ID, map[string]any{
			"agentId": failed.AgentID, "errorCode": clasp.RunErrorProcessLost, "pid": failed.PID, "attempt": failed.Attempt,
		}); err != nil {
			return err
		}
		if retryJSON != nil {
			if err := json.Unmarshal(retryJSON, &rj); err != nil {
				return err
			}
			retry = rj.run()
			if err := logActivity(ctx, tx, retry.CompanyID, system, clasp.ActionRunQueued, "run", retry.ID, map[string]any{
				"agentId": retry.AgentID, "issueId": retry.IssueID, "reason": clasp.InvocationRetry, "retryOfRunId": failed.ID, "attempt": 2,
			}); err != nil {
				return err
			}
			var moved [][2]string
			if err := json.Unmarshal(movedJSON, &moved); err != nil {
				return err
			}
			for _, m := range moved {
				if err := logActivity(ctx, tx, m[1], system, clasp.ActionIssueLockMoved, "issue", m[0], map[string]any{
					"fromRunId": failed.ID, "toRunId": retry.ID, "clearedCheckoutRunId": failed.ID,
				}); err != nil {
					return err
				}
			}
		}
		// L6 for what still names the lost run, and promotion of the wakes
		// that waited for it (releaseRunLocks).
		return releaseRunLocks(ctx, tx, system, failed.Status, []*clasp.Run{failed})
	})
	if err != nil {
		return nil, nil, err
	}
	return failed, retry, nil
}

// AgentCancelQueuedRuns cancels an agent's queued runs (pausing it).
func (s *Store) AgentCancelQueuedRuns(ctx context.Context, agentID string, actor store.Actor) (int, error) {
	n := 0
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if err := lockAgent(ctx, tx, agentID); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `UPDATE runs SET status = 'cancelled', error_code = 'agent_paused',
			error = 'the agent was paused', finished_at = now() WHERE agent_id = $1 AND status = 'queued' RETURNING `+runCols, agentID)
		if err != nil {
			return fmt.Errorf("cancel queued runs of agent %s: %w", agentID, err)
		}
		runs, err := scanAll(rows, scanRun)
		if err != nil {
			return err
		}
		n = len(runs)
		if _, err := tx.Exec(ctx, `UPDATE wake_requests SET status = 'skipped', updated_at = now() WHERE agent_id = $1 AND status = 'deferred'`,
			agentID); err != nil {
			return err
		}
		if len(runs) == 0 {
			return nil
		}
		return releaseRunLocks(ctx, tx, actor, clasp.RunCancelled, runs)
	})
	return n, err
}
