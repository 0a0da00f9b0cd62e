package sqlite

// Server-managed agents (issue 4): adapter configs, wake requests, and the
// life cycle of the runs the heartbeat scheduler starts. Each rule is one
// conditional statement whose WHERE decides, inside the store's write
// transaction (which holds SQLite's write lock from its first statement, so
// the reads next to a rule only fill audit details or explain a refusal).

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

var _ store.HeartbeatStore = (*Store)(nil)

const (
	// hbTakeExecution: a run queued for an issue takes its execution lock
	// when the issue is its agent's or unassigned and not done or cancelled
	// (store.WakeIssueRefusal, checked first for the error's reason), and
	// both lock columns are empty or name dead runs; a dead checkout
	// lock is cleared in the same write (seed 004: no lock stays pinned to a
	// dead run), so L7 holds. Matching nothing means a live run holds it.
	hbTakeExecution = `UPDATE issues SET
		execution_run_id = :run,
		execution_agent_name_key = (SELECT a.name_key FROM agents a WHERE a.id = :agent),
		execution_locked_at = :now,
		checkout_run_id = NULL,
		updated_at = :now
	WHERE id = :issue
		AND status NOT IN ('done', 'cancelled')
		AND (assignee_agent_id IS NULL OR assignee_agent_id = :agent)
		AND (execution_run_id IS NULL OR NOT ` + sqlLiveExecution + `)
		AND (checkout_run_id IS NULL OR NOT ` + sqlLiveCheckout + `)`

	hbRunInsert = `INSERT INTO runs (id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id,
		attempt, managed, created_at)
	VALUES (:id, :company, :agent, 'queued', :source, :issue, :retry_of, :attempt, 1, :now)
	ON CONFLICT DO NOTHING
	RETURNING ` + runCols

	// hbRunStart: a queued run starts when its agent is active and has
	// fewer than :max running runs with a live lease.
	hbRunStart = `UPDATE runs SET
		status = 'running', host_id = :host, token_hash = :hash, started_at = :now,
		lease_expires_at = :now + :ttl, last_sign_of_life_at = :now
	WHERE id = :run AND status = 'queued'
		AND EXISTS (SELECT 1 FROM agents a WHERE a.id = runs.agent_id AND a.status = 'active')
		AND (SELECT count(*) FROM runs r2 WHERE r2.agent_id = runs.agent_id AND r2.status = 'running'
			AND r2.lease_expires_at > :now) < :max
	RETURNING ` + runCols

	// hbProcessLost: a running managed run of :host whose process is gone.
	hbProcessLost = `UPDATE runs SET
		status = 'failed', error_code = 'process_lost', error = :error, finished_at = :now
	WHERE id = :run AND status = 'running' AND managed = 1 AND host_id = :host
	RETURNING ` + runCols

	// hbHeldIssue: the issue whose execution lock a lost run :lost hands to
	// its retry: its own issue :issue if it still holds that lock, else the
	// issue it locked last (a run woken without an issue that checked one
	// out). No row: it holds no execution lock.
	hbHeldIssue = `SELECT id FROM issues WHERE execution_run_id = :lost
	ORDER BY (id IS :issue) DESC, execution_locked_at DESC, id LIMIT 1`

	// hbMoveExecution: in ONE statement, the execution lock of issue
	// :issue, still naming the lost run :lost, moves to the retry :retry,
	// and the lost run's checkout lock is cleared (seed 004: the dead run
	// owns nothing). Other locks naming the lost run are released (L6).
	hbMoveExecution = `UPDATE issues SET
		execution_run_id = :retry,
		execution_locked_at = :now,
		checkout_run_id = CASE WHEN checkout_run_id = :lost THEN NULL ELSE checkout_run_id END,
		updated_at = :now
	WHERE id = :issue AND execution_run_id = :lost
	RETURNING id, company_id`

	hbManagedCols = runCols + `, coalesce(proc_start, 0)`
)

// Raw statements run on the write transaction without preparation (the
// prepared set in queries.go is for the hot paths).
func (t *wtx) rctx(ctx context.Context) context.Context {
	if ctx.Err() != nil {
		return ctx
	}
	return context.Background()
}

func (t *wtx) rexec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return t.b.tx.ExecContext(t.rctx(ctx), q, args...)
}

func (t *wtx) rrow(ctx context.Context, q string, args ...any) *sql.Row {
	return t.b.tx.QueryRowContext(t.rctx(ctx), q, args...)
}

func (t *wtx) rquery(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return t.b.tx.QueryContext(t.rctx(ctx), q, args...)
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

// AgentAdapterSet stores (or, Config nil, removes) an agent's adapter
// config after Normalize. 400 invalid_request, 404 not_found, 422
// precondition_failed (terminated agent). Activity agent.adapter_set.
func (s *Store) AgentAdapterSet(ctx context.Context, p *store.AgentAdapterSetParams) (*clasp.AdapterConfig, error) {
	var cfg any
	if p.Config != nil {
		if err := p.Config.Normalize(); err != nil {
			return nil, err
		}
		b, err := json.Marshal(p.Config)
		if err != nil {
			return nil, err
		}
		cfg = string(b)
	}
	err := s.write(ctx, func(tx *wtx) error {
		var company string
		err := tx.rrow(ctx, `UPDATE agents SET adapter_config = ? WHERE id = ? AND status <> 'terminated' RETURNING company_id`,
			cfg, p.AgentID).Scan(&company)
		if errors.Is(err, sql.ErrNoRows) {
			a, err := tx.agent(ctx, p.AgentID)
			if err != nil {
				return err
			}
			return clasp.Errorf(clasp.CodePreconditionFailed, "Agent %s is terminated: its adapter cannot change.", a.ID)
		}
		if err != nil {
			return fmt.Errorf("set adapter of agent %s: %w", p.AgentID, err)
		}
		typ := ""
		if p.Config != nil {
			typ = p.Config.Type
		}
		return tx.logActivity(ctx, company, p.Actor, clasp.ActionAgentAdapterSet, "agent", p.AgentID, map[string]any{"adapterType": typ})
	})
	if err != nil {
		return nil, err
	}
	return p.Config, nil
}

// AgentAdapterGet returns an agent's adapter config, nil when it has none. 404 not_found.
func (s *Store) AgentAdapterGet(ctx context.Context, agentID string) (*clasp.AdapterConfig, error) {
	var raw sql.NullString
	err := s.r.QueryRowContext(ctx, `SELECT adapter_config FROM agents WHERE id = ?`, agentID).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("agent", agentID)
	}
	if err != nil {
		return nil, translate(fmt.Errorf("get adapter of agent %s: %w", agentID, err))
	}
	return parseAdapter(raw)
}

func parseAdapter(raw sql.NullString) (*clasp.AdapterConfig, error) {
	if !raw.Valid {
		return nil, nil
	}
	var c clasp.AdapterConfig
	if err := json.Unmarshal([]byte(raw.String), &c); err != nil {
		return nil, fmt.Errorf("adapter config: %w", err)
	}
	return &c, nil
}

// AgentAdapterList returns every non-terminated agent with an adapter config.
func (s *Store) AgentAdapterList(ctx context.Context) ([]*store.AgentAdapter, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+agentCols+`, adapter_config FROM agents
		WHERE adapter_config IS NOT NULL AND status <> 'terminated' ORDER BY created_at, id`)
	if err != nil {
		return nil, translate(fmt.Errorf("list adapters: %w", err))
	}
	defer rows.Close()
	var out []*store.AgentAdapter
	for rows.Next() {
		var raw sql.NullString
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

// adapterOf reads an agent's adapter inside the transaction.
func (t *wtx) adapterOf(ctx context.Context, agentID string) (*clasp.AdapterConfig, error) {
	var raw sql.NullString
	if err := t.rrow(ctx, `SELECT adapter_config FROM agents WHERE id = ?`, agentID).Scan(&raw); err != nil {
		return nil, fmt.Errorf("get adapter of agent %s: %w", agentID, err)
	}
	return parseAdapter(raw)
}

// Wake records a wake request of agent AgentID and acts on it (see
// store.WakeParams). 400 invalid_request (reason), 404 not_found (agent,
// or issue of its company).
func (s *Store) Wake(ctx context.Context, p *store.WakeParams) (*store.WakeResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var out *store.WakeResult
	err := s.write(ctx, func(tx *wtx) error {
		var err error
		out, err = tx.wake(ctx, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (t *wtx) wake(ctx context.Context, p *store.WakeParams) (*store.WakeResult, error) {
	if p.IdempotencyKey != "" {
		var id, status string
		var runID, blocked, hash sql.NullString
		var company string
		err := t.rrow(ctx, `SELECT id, status, run_id, blocked_by_run_id, request_hash, company_id FROM wake_requests WHERE agent_id = ? AND idempotency_key = ?`,
			p.AgentID, p.IdempotencyKey).Scan(&id, &status, &runID, &blocked, &hash, &company)
		if err == nil && hash.Valid {
			// The same request names the same issue (by UUID or
			// identifier); a missing issue is another request.
			issueID := ""
			if p.IssueID != "" {
				var co string
				rid, rident := splitRef(p.IssueID)
				if err := t.queryRow(ctx, qIssueRef, sql.Named("rid", rid), sql.Named("rident", rident),
					sql.Named("company", company)).Scan(&issueID, &co); err != nil && !errors.Is(err, sql.ErrNoRows) {
					return nil, fmt.Errorf("find issue %s: %w", p.IssueID, err)
				} else if err != nil {
					issueID = "missing:" + p.IssueID
				}
			}
			if hash.String != store.WakeRequestHash(p.Reason, issueID) {
				return nil, store.ErrWakeKeyReused(p.IdempotencyKey)
			}
		}
		if err == nil {
			res := &store.WakeResult{WakeID: id, Outcome: status, BlockedByRunID: strPtr(blocked), Replayed: true}
			if runID.Valid {
				if res.Run, err = scanRun(t.queryRow(ctx, qRunGet, runID.String)); err != nil {
					return nil, fmt.Errorf("get run %s: %w", runID.String, err)
				}
			}
			return res, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("find wake: %w", err)
		}
	}
	a, err := t.agent(ctx, p.AgentID)
	if err != nil {
		return nil, err
	}
	if p.Actor.Type == clasp.ActorAgent && p.Actor.CompanyID != a.CompanyID {
		return nil, notFound("agent", p.AgentID)
	}
	issueID := ""
	if p.IssueID != "" {
		rid, rident := splitRef(p.IssueID)
		var company string
		err := t.queryRow(ctx, qIssueRef, sql.Named("rid", rid), sql.Named("rident", rident),
			sql.Named("company", a.CompanyID)).Scan(&issueID, &company)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, notFound("issue", p.IssueID)
		}
		if err != nil {
			return nil, fmt.Errorf("find issue %s: %w", p.IssueID, err)
		}
		if err := t.wakeRefusal(ctx, a.ID, issueID); err != nil {
			return nil, err
		}
	}
	cfg, err := t.adapterOf(ctx, a.ID)
	if err != nil {
		return nil, err
	}
	res := &store.WakeResult{WakeID: t.s.newID()}
	switch {
	case a.Status != clasp.AgentActive || cfg == nil:
		res.Outcome = store.WakeSkipped
	default:
		res.Run, err = t.queuedRunFor(ctx, a.ID, issueID)
		if err != nil {
			return nil, err
		}
		if res.Run != nil {
			res.Outcome = store.WakeCoalesced
			break
		}
		var blocked string
		res.Run, blocked, err = t.queueRun(ctx, a, issueID, p.Reason, "", 1, p.Actor)
		if err != nil {
			return nil, err
		}
		if res.Run != nil {
			res.Outcome = store.WakeQueued
		} else {
			res.Outcome, res.BlockedByRunID = store.WakeDeferred, &blocked
		}
	}
	var runID any
	if res.Run != nil {
		runID = res.Run.ID
	}
	var hash any
	if p.IdempotencyKey != "" {
		hash = store.WakeRequestHash(p.Reason, issueID)
	}
	if _, err := t.rexec(ctx, `INSERT INTO wake_requests (id, company_id, agent_id, issue_id, reason, idempotency_key,
		status, run_id, blocked_by_run_id, created_at, updated_at, request_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		res.WakeID, a.CompanyID, a.ID, nullable(issueID), p.Reason, nullable(p.IdempotencyKey), res.Outcome, runID,
		nullString(res.BlockedByRunID), t.now, t.now, hash); err != nil {
		return nil, fmt.Errorf("record wake of agent %s: %w", a.ID, err)
	}
	return res, t.logActivity(ctx, a.CompanyID, p.Actor, clasp.ActionWakeRequested, "agent", a.ID, map[string]any{
		"wakeId": res.WakeID, "reason": p.Reason, "issueId": nullable(issueID), "outcome": res.Outcome,
		"runId": runID, "blockedByRunId": res.BlockedByRunID,
	})
}

// wakeRefusal reads issue issueID and returns store.WakeIssueRefusal's
// answer for waking agentID for it (nil: it may be woken), or the read's
// error.
func (t *wtx) wakeRefusal(ctx context.Context, agentID, issueID string) error {
	var status string
	var assignee, checkout, execution sql.NullString
	if err := t.rrow(ctx, `SELECT status, assignee_agent_id, checkout_run_id, execution_run_id FROM issues WHERE id = ?`, issueID).
		Scan(&status, &assignee, &checkout, &execution); err != nil {
		return fmt.Errorf("read issue %s: %w", issueID, err)
	}
	return store.WakeIssueRefusal(agentID, issueID, clasp.IssueStatus(status), strPtr(assignee), strPtr(checkout), strPtr(execution))
}

// queuedRunFor returns the agent's queued managed run for issueID (for no
// issue when ""), nil if it has none.
func (t *wtx) queuedRunFor(ctx context.Context, agentID, issueID string) (*clasp.Run, error) {
	r, err := scanRun(t.rrow(ctx, `SELECT `+runCols+` FROM runs WHERE agent_id = ? AND status = 'queued' AND managed = 1
		AND issue_id IS ? ORDER BY created_at LIMIT 1`, agentID, nullable(issueID)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find queued run of agent %s: %w", agentID, err)
	}
	return r, nil
}

// queueRun queues a managed run of agent a for issueID ("" none). With an
// issue, the run's id first takes the issue's execution lock
// (hbTakeExecution); when that matches nothing no run is queued and
// blockedBy names the live run holding the issue. retryOf and attempt are
// set for a retry; a second retry of the same run inserts nothing (nil, "").
func (t *wtx) queueRun(ctx context.Context, a *clasp.Agent, issueID, reason, retryOf string, attempt int, actor store.Actor) (run *clasp.Run, blockedBy string, err error) {
	id := t.s.newID()
	var prevCheckout, prevExecution sql.NullString
	takeLock := issueID != "" && retryOf == "" // a retry's lock is moved by hbMoveExecution
	if takeLock {
		if err := t.rrow(ctx, `SELECT checkout_run_id, execution_run_id FROM issues WHERE id = ?`, issueID).
			Scan(&prevCheckout, &prevExecution); err != nil {
			return nil, "", fmt.Errorf("read issue %s: %w", issueID, err)
		}
		res, err := t.rexec(ctx, hbTakeExecution, sql.Named("run", id), sql.Named("agent", a.ID),
			sql.Named("issue", issueID), sql.Named("now", t.now))
		if err != nil {
			return nil, "", fmt.Errorf("take execution lock of issue %s: %w", issueID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil, cmpOr(prevExecution.String, prevCheckout.String), nil
		}
	}
	run, err = scanRun(t.rrow(ctx, hbRunInsert, sql.Named("id", id), sql.Named("company", a.CompanyID), sql.Named("agent", a.ID),
		sql.Named("source", reason), sql.Named("issue", nullable(issueID)), sql.Named("retry_of", nullable(retryOf)),
		sql.Named("attempt", attempt), sql.Named("now", t.now)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("queue run of agent %s: %w", a.ID, err)
	}
	if err := t.logActivity(ctx, a.CompanyID, actor, clasp.ActionRunQueued, "run", run.ID, map[string]any{
		"agentId": a.ID, "issueId": run.IssueID, "reason": reason, "retryOfRunId": run.RetryOfRunID, "attempt": run.Attempt,
	}); err != nil {
		return nil, "", err
	}
	if takeLock {
		if err := t.logActivity(ctx, a.CompanyID, actor, clasp.ActionIssueExecutionLocked, "issue", issueID, map[string]any{
			"runId": run.ID, "previousCheckoutRunId": orNil(prevCheckout), "previousExecutionRunId": orNil(prevExecution),
		}); err != nil {
			return nil, "", err
		}
	}
	return run, "", nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// promoteBlockedBy promotes the deferred wakes that waited for run runID,
// oldest first: the first for an issue whose lock is now free gets a
// queued run holding its execution lock; later ones of the same agent
// coalesce into it; the others wait for the new holder. Part of rule L6:
// it runs in the transaction that ended runID.
func (t *wtx) promoteBlockedBy(ctx context.Context, runID string) error {
	rows, err := t.rquery(ctx, `SELECT id, company_id, agent_id, coalesce(issue_id, ''), reason FROM wake_requests
		WHERE status = 'deferred' AND blocked_by_run_id = ? ORDER BY created_at, id`, runID)
	if err != nil {
		return fmt.Errorf("find deferred wakes of run %s: %w", runID, err)
	}
	type wake struct{ id, company, agent, issue, reason string }
	var ws []wake
	for rows.Next() {
		var w wake
		if err := rows.Scan(&w.id, &w.company, &w.agent, &w.issue, &w.reason); err != nil {
			_ = rows.Close() // the scan error is the one returned
			return fmt.Errorf("find deferred wakes of run %s: %w", runID, err)
		}
		ws = append(ws, w)
	}
	_ = rows.Close() // read-only rows: a close error leaves nothing behind; rows.Err is checked next
	if err := rows.Err(); err != nil {
		return fmt.Errorf("find deferred wakes of run %s: %w", runID, err)
	}
	for _, w := range ws {
		a, err := t.agent(ctx, w.agent)
		if err != nil {
			return err
		}
		cfg, err := t.adapterOf(ctx, a.ID)
		if err != nil {
			return err
		}
		allowed := true // the issue may have been reassigned or closed while the wake waited
		if w.issue != "" {
			refusal := t.wakeRefusal(ctx, a.ID, w.issue)
			var ce *clasp.Error
			if refusal != nil && !errors.As(refusal, &ce) {
				return refusal
			}
			allowed = refusal == nil
		}
		status, blocked := store.WakeSkipped, ""
		var run *clasp.Run
		if a.Status == clasp.AgentActive && cfg != nil && allowed {
			if run, err = t.queuedRunFor(ctx, a.ID, w.issue); err != nil {
				return err
			}
			status = store.WakeCoalesced
			if run == nil {
				if run, blocked, err = t.queueRun(ctx, a, w.issue, w.reason, "", 1, systemActor); err != nil {
					return err
				}
				status = store.WakeQueued
				if run == nil {
					status = store.WakeDeferred
				}
			}
		}
		var rid any
		if run != nil {
			rid = run.ID
		}
		if _, err := t.rexec(ctx, `UPDATE wake_requests SET status = ?, run_id = ?, blocked_by_run_id = ?, updated_at = ?
			WHERE id = ? AND status = 'deferred'`, status, rid, nullable(blocked), t.now, w.id); err != nil {
			return fmt.Errorf("promote wake %s: %w", w.id, err)
		}
		if status != store.WakeDeferred {
			if err := t.logActivity(ctx, w.company, systemActor, clasp.ActionWakePromoted, "agent", w.agent, map[string]any{
				"wakeId": w.id, "runId": rid, "issueId": nullable(w.issue), "endedRunId": runID, "outcome": status,
			}); err != nil {
				return err
			}
		}
	}
	return nil
}

// WakePromoteDeferred promotes the deferred wakes whose blocking run is
// dead (terminal, lost or missing): the catch-all for runs that ended
// without RunFinish (lease_expired). Returns how many wakes left deferred.
func (s *Store) WakePromoteDeferred(ctx context.Context) (int, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT DISTINCT w.blocked_by_run_id FROM wake_requests w
		WHERE w.status = 'deferred' AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = w.blocked_by_run_id
			AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > ?)))`, s.nowMicros())
	if err != nil {
		return 0, translate(fmt.Errorf("find deferred wakes: %w", err))
	}
	var runs []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			_ = rows.Close() // the scan error is the one returned
			return 0, err
		}
		runs = append(runs, id)
	}
	_ = rows.Close() // read-only rows: a close error leaves nothing behind; rows.Err is checked next
	total := 0
	for _, id := range runs {
		err := s.write(ctx, func(tx *wtx) error {
			var before, after int
			q := `SELECT count(*) FROM wake_requests WHERE status = 'deferred'`
			if err := tx.rrow(ctx, q).Scan(&before); err != nil {
				return err
			}
			// Re-checked inside the write: the blocking run is still dead.
			var live int
			if err := tx.rrow(ctx, `SELECT count(*) FROM runs WHERE id = ? AND (status = 'queued'
				OR (status = 'running' AND lease_expires_at > ?))`, id, tx.now).Scan(&live); err != nil || live > 0 {
				return err
			}
			if err := tx.promoteBlockedBy(ctx, id); err != nil {
				return err
			}
			if err := tx.rrow(ctx, q).Scan(&after); err != nil {
				return err
			}
			total += before - after
			return nil
		})
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// RunQueuedManaged lists queued managed runs of active agents with an
// adapter, oldest first.
func (s *Store) RunQueuedManaged(ctx context.Context, limit int) ([]*store.ManagedRun, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+hbManagedCols+` FROM runs WHERE status = 'queued' AND managed = 1
		AND agent_id IN (SELECT id FROM agents WHERE status = 'active' AND adapter_config IS NOT NULL)
		ORDER BY created_at, id LIMIT ?`, pageLimit(limit))
	if err != nil {
		return nil, translate(fmt.Errorf("list queued runs: %w", err))
	}
	return scanAll(rows, scanManaged)
}

// RunRunningOnHost lists the running managed runs of hostID.
func (s *Store) RunRunningOnHost(ctx context.Context, hostID string) ([]*store.ManagedRun, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+hbManagedCols+` FROM runs WHERE status = 'running' AND managed = 1
		AND host_id = ? ORDER BY created_at, id`, hostID)
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
	err := s.write(ctx, func(tx *wtx) error {
		r, err := scanRun(tx.rrow(ctx, hbRunStart, sql.Named("run", p.RunID), sql.Named("host", p.HostID),
			sql.Named("hash", nullable(p.TokenHash)), sql.Named("ttl", ttl.Microseconds()),
			sql.Named("max", max(p.MaxRunning, 1)), sql.Named("now", tx.now)))
		if errors.Is(err, sql.ErrNoRows) {
			cur, err := scanRun(tx.queryRow(ctx, qRunGet, p.RunID))
			if errors.Is(err, sql.ErrNoRows) {
				return notFound("run", p.RunID)
			}
			if err != nil {
				return err
			}
			if cur.Status != clasp.RunQueued {
				return clasp.Errorf(clasp.CodeRunNotLive, "Run %s is %s, not queued.", cur.ID, cur.Status).WithDetails("runId", cur.ID)
			}
			a, err := tx.agent(ctx, cur.AgentID)
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
		if _, err := tx.exec(ctx, qAgentHeartbeat, tx.now, r.AgentID); err != nil {
			return fmt.Errorf("heartbeat of agent %s: %w", r.AgentID, err)
		}
		return tx.logActivity(ctx, r.CompanyID, systemActor, clasp.ActionRunStarted, "run", r.ID, map[string]any{
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
	return s.write(ctx, func(tx *wtx) error {
		res, err := tx.rexec(ctx, `UPDATE runs SET pid = ?, proc_start = ? WHERE id = ? AND host_id = ? AND status = 'running'`,
			pid, procStart, runID, hostID)
		if err != nil {
			return fmt.Errorf("record process of run %s: %w", runID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
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
	return s.write(ctx, func(tx *wtx) error {
		res, err := tx.rexec(ctx, `UPDATE runs SET lease_expires_at = ?1 + ?2, last_sign_of_life_at = ?1
			WHERE id = ?3 AND host_id = ?4 AND status = 'running' AND lease_expires_at > ?1`,
			tx.now, ttl.Microseconds(), runID, hostID)
		if err != nil {
			return fmt.Errorf("renew run %s: %w", runID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return clasp.Errorf(clasp.CodeRunNotLive, "Run %s is not live on this host.", runID).WithDetails("runId", runID)
		}
		return nil
	})
}

// RunProcessLost fails a run whose process is gone and queues its one
// retry (store.HeartbeatStore.RunProcessLost).
func (s *Store) RunProcessLost(ctx context.Context, p *store.RunProcessLostParams) (failed, retry *clasp.Run, err error) {
	msg := cmpOr(p.Error, "process lost: the run's process is gone")
	err = s.write(ctx, func(tx *wtx) error {
		failed, retry = nil, nil
		run, err := scanRun(tx.rrow(ctx, hbProcessLost, sql.Named("run", p.RunID), sql.Named("host", p.HostID),
			sql.Named("error", msg), sql.Named("now", tx.now)))
		if errors.Is(err, sql.ErrNoRows) {
			return clasp.Errorf(clasp.CodeRunNotLive, "Run %s is not a running managed run of this host.", p.RunID).
				WithDetails("runId", p.RunID)
		}
		if err != nil {
			return fmt.Errorf("fail run %s: %w", p.RunID, err)
		}
		failed = run
		if err := tx.logActivity(ctx, run.CompanyID, systemActor, clasp.ActionRunLost, "run", run.ID, map[string]any{
			"agentId": run.AgentID, "errorCode": clasp.RunErrorProcessLost, "pid": run.PID, "attempt": run.Attempt,
		}); err != nil {
			return err
		}
		if run.Attempt == 1 && run.RetryOfRunID == nil {
			a, err := tx.agent(ctx, run.AgentID)
			if err != nil {
				return err
			}
			// The retry's issue is the one whose execution lock it
			// receives; without one, the lost run's own issue.
			var held sql.NullString
			if err := tx.rrow(ctx, hbHeldIssue, sql.Named("lost", run.ID), sql.Named("issue", nullable(deref(run.IssueID)))).
				Scan(&held); err != nil && !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("find the issue of run %s: %w", run.ID, err)
			}
			issue := cmpOr(held.String, deref(run.IssueID))
			// The retry is inserted first (queueRun takes no lock for a
			// retry; unique retry_of_run_id: at most one), then the lock
			// moves in one statement.
			retry, _, err = tx.queueRun(ctx, a, issue, clasp.InvocationRetry, run.ID, 2, systemActor)
			if err != nil {
				return err
			}
			if retry != nil && held.Valid {
				rows, err := tx.rquery(ctx, hbMoveExecution, sql.Named("retry", retry.ID), sql.Named("lost", run.ID),
					sql.Named("issue", held.String), sql.Named("now", tx.now))
				if err != nil {
					return fmt.Errorf("move locks of run %s: %w", run.ID, err)
				}
				type moved struct{ id, company string }
				var ms []moved
				for rows.Next() {
					var m moved
					if err := rows.Scan(&m.id, &m.company); err != nil {
						_ = rows.Close() // the scan error is the one returned
						return err
					}
					ms = append(ms, m)
				}
				_ = rows.Close() // read-only rows: a close error leaves nothing behind; rows.Err is checked next
				for _, m := range ms {
					if err := tx.logActivity(ctx, m.company, systemActor, clasp.ActionIssueLockMoved, "issue", m.id, map[string]any{
						"fromRunId": run.ID, "toRunId": retry.ID, "clearedCheckoutRunId": run.ID,
					}); err != nil {
						return err
					}
				}
			}
		}
		// L6 for what still names the lost run (no retry, or locks the retry
		// did not take), and promotion of the wakes that waited for it.
		return tx.releaseRunLocks(ctx, run, systemActor)
	})
	if err != nil {
		return nil, nil, err
	}
	return failed, retry, nil
}

// AgentCancelQueuedRuns cancels an agent's queued runs (pausing it): each
// ends as cancelled (agent_paused) with its locks released (L6); the
// agent's deferred wakes are skipped. Returns how many runs it cancelled.
func (s *Store) AgentCancelQueuedRuns(ctx context.Context, agentID string, actor store.Actor) (int, error) {
	n := 0
	err := s.write(ctx, func(tx *wtx) error {
		rows, err := tx.rquery(ctx, `UPDATE runs SET status = 'cancelled', error_code = 'agent_paused',
			error = 'the agent was paused', finished_at = ? WHERE agent_id = ? AND status = 'queued' RETURNING `+runCols, tx.now, agentID)
		if err != nil {
			return fmt.Errorf("cancel queued runs of agent %s: %w", agentID, err)
		}
		runs, err := scanAll(rows, scanRun)
		if err != nil {
			return err
		}
		n = len(runs)
		for _, r := range runs {
			if err := tx.releaseRunLocks(ctx, r, actor); err != nil {
				return err
			}
			if err := tx.logActivity(ctx, r.CompanyID, actor, clasp.ActionRunFinished, "run", r.ID, map[string]any{
				"status": r.Status, "exitCode": r.ExitCode, "error": r.Error, "errorCode": r.ErrorCode,
			}); err != nil {
				return err
			}
		}
		_, err = tx.rexec(ctx, `UPDATE wake_requests SET status = 'skipped', updated_at = ? WHERE agent_id = ? AND status = 'deferred'`,
			tx.now, agentID)
		return err
	})
	return n, err
}

// deref is *p, or "" for nil.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
