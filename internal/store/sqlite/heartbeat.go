package sqlite

// Server-managed agents on SQLite: the statements of store.HeartbeatTx
// (adapter configs, wake requests, the life cycle of the runs the
// heartbeat scheduler starts), run inside the store's write transaction,
// which holds SQLite's write lock from its first statement. The algorithms
// are store.TxRunner's.

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

// scanManaged reads a ManagedRun (store.ScanManaged).
func scanManaged(sc store.Row) (*store.ManagedRun, error) {
	return store.ScanManaged(sc, func(sc store.Scanner) (*clasp.Run, error) { return store.ScanRun(sc) })
}

// scanAgentAdapter reads an agent and its adapter config (store.ScanAgentAdapter).
func scanAgentAdapter(sc store.Row) (*store.AgentAdapter, error) {
	return store.ScanAgentAdapter(sc, func(sc store.Scanner) (*clasp.Agent, error) { return store.ScanAgent(sc) })
}

// noRow is (nil, nil) for sql.ErrNoRows, else (v, err).
func noRow[T any](v *T, err error) (*T, error) {
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return v, err
}

// scanIDs reads a one-column result of strings, then closes rows.
func scanIDs(rows *sql.Rows) ([]string, error) {
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// hbtx is a write transaction as store.HeartbeatTx.
type hbtx struct{ t *wtx }

// hb is the store's write transaction as a store.TxRunner.
func (s *Store) hb() store.TxRunner {
	return func(ctx context.Context, fn func(store.HeartbeatTx) error) error {
		return s.write(ctx, func(tx *wtx) error { return fn(hbtx{tx}) })
	}
}

func (h hbtx) NewID() string { return h.t.s.newID() }

func (h hbtx) LogActivity(ctx context.Context, companyID string, actor store.Actor, action, entityType, entityID string, details any) error {
	return h.t.logActivity(ctx, companyID, actor, action, entityType, entityID, details)
}

func (hbtx) LockAgent(context.Context, string) error { return nil } // the write lock is held

func (h hbtx) WakeByKey(ctx context.Context, agentID, key string) (*store.RecordedWake, error) {
	var w store.RecordedWake
	err := h.t.queryRow(ctx, "WakeByKey", sql.Named("agent", agentID), sql.Named("key", key)).
		Scan(&w.ID, &w.Status, &w.RunID, &w.BlockedByRunID, &w.RequestHash, &w.CompanyID)
	return noRow(&w, err)
}

func (h hbtx) IssueID(ctx context.Context, companyID, ref string) (string, error) {
	var id, company string
	rid, rident := splitRef(ref)
	err := h.t.queryRow(ctx, qIssueRef, sql.Named("rid", rid), sql.Named("rident", rident),
		sql.Named("company", companyID)).Scan(&id, &company)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return id, err
}

func (h hbtx) AgentAdapter(ctx context.Context, agentID string) (*clasp.Agent, *clasp.AdapterConfig, error) {
	aa, err := scanAgentAdapter(h.t.queryRow(ctx, "AgentWithAdapter", sql.Named("agent", agentID)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, notFound("agent", agentID)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("get agent %s: %w", agentID, err)
	}
	return aa.Agent, aa.Config, nil
}

func (h hbtx) IssueLocks(ctx context.Context, issueID string) (*store.IssueLockState, error) {
	var l store.IssueLockState
	err := h.t.queryRow(ctx, "WakeIssueLocks", sql.Named("issue", issueID)).
		Scan(&l.Status, &l.AssigneeAgentID, &l.CheckoutRunID, &l.ExecutionRunID)
	if err != nil {
		return nil, err
	}
	return &l, nil
}

func (h hbtx) QueuedRunFor(ctx context.Context, agentID, issueID string) (*clasp.Run, error) {
	return noRow(store.ScanRun(h.t.queryRow(ctx, "WakeQueuedRun", sql.Named("agent", agentID), sql.Named("issue", nullable(issueID)))))
}

func (h hbtx) TakeExecution(ctx context.Context, runID, agentID, issueID string) (bool, error) {
	res, err := h.t.exec(ctx, "WakeTakeExecution", sql.Named("run", runID), sql.Named("agent", agentID),
		sql.Named("issue", issueID), sql.Named("now", h.t.now))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

func (h hbtx) InsertQueuedRun(ctx context.Context, r *store.QueuedRun) (*clasp.Run, error) {
	return noRow(store.ScanRun(h.t.queryRow(ctx, "RunInsertQueued", sql.Named("id", r.ID), sql.Named("company", r.CompanyID),
		sql.Named("agent", r.AgentID), sql.Named("source", r.Reason), sql.Named("issue", nullable(r.IssueID)),
		sql.Named("retry_of", nullable(r.RetryOfRunID)), sql.Named("attempt", r.Attempt), sql.Named("now", h.t.now))))
}

func (h hbtx) RunGet(ctx context.Context, id string) (*clasp.Run, error) {
	r, err := store.ScanRun(h.t.queryRow(ctx, "RunGet", sql.Named("id", id)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("run", id)
	}
	return r, err
}

func (h hbtx) InsertWake(ctx context.Context, w *store.WakeRecord) error {
	_, err := h.t.exec(ctx, "WakeInsert", sql.Named("id", w.ID), sql.Named("company", w.CompanyID), sql.Named("agent", w.AgentID),
		sql.Named("issue", nullable(w.IssueID)), sql.Named("reason", w.Reason), sql.Named("key", nullable(w.IdempotencyKey)),
		sql.Named("status", w.Outcome), sql.Named("run", w.RunID), sql.Named("blocked_by", w.BlockedByRunID),
		sql.Named("hash", w.RequestHash), sql.Named("now", h.t.now))
	return err
}

func (h hbtx) DeferredWakes(ctx context.Context, runIDs []string) ([]*store.DeferredWake, error) {
	ids, err := json.Marshal(runIDs)
	if err != nil {
		return nil, err
	}
	rows, err := h.t.query(ctx, "WakeDeferredList", sql.Named("runs", string(ids)))
	if err != nil {
		return nil, err
	}
	return scanAll(rows, func(sc store.Row) (*store.DeferredWake, error) {
		var w store.DeferredWake
		return &w, sc.Scan(&w.ID, &w.CompanyID, &w.AgentID, &w.IssueID, &w.Reason, &w.EndedRunID)
	})
}

func (h hbtx) SetWakeOutcome(ctx context.Context, wakeID, status string, runID, blockedBy *string) error {
	_, err := h.t.exec(ctx, "WakePromote", sql.Named("id", wakeID), sql.Named("status", status), sql.Named("run", runID),
		sql.Named("blocked_by", blockedBy), sql.Named("now", h.t.now))
	return err
}

func (h hbtx) SetAdapter(ctx context.Context, agentID string, cfg *string) (string, bool, error) {
	var company string
	err := h.t.queryRow(ctx, "AgentAdapterSet", sql.Named("agent", agentID), sql.Named("config", cfg)).Scan(&company)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return company, err == nil, err
}

func (h hbtx) StartRun(ctx context.Context, p *store.RunStartParams, ttl time.Duration) (*clasp.Run, error) {
	return noRow(store.ScanRun(h.t.queryRow(ctx, "RunStart", sql.Named("run", p.RunID), sql.Named("host", p.HostID),
		sql.Named("hash", nullable(p.TokenHash)), sql.Named("ttl", ttl.Microseconds()),
		sql.Named("max", max(p.MaxRunning, 1)), sql.Named("now", h.t.now))))
}

func (h hbtx) AgentHeartbeat(ctx context.Context, agentID string) error {
	_, err := h.t.exec(ctx, "AgentHeartbeat", sql.Named("agent", agentID), sql.Named("now", h.t.now))
	return err
}

// ProcessLost is the process-loss rule in four statements of the write
// transaction (SQLite has no writing CTEs): the run fails (RunProcessLost);
// attempt 1 without a retry gets one, for the issue whose execution lock it
// holds (RunHeldIssue) or its own, inserted first (unique retry_of_run_id:
// at most one); then that lock moves to the retry (RunMoveExecution).
func (h hbtx) ProcessLost(ctx context.Context, p *store.RunProcessLostParams, msg, retryID string) (*store.ProcessLoss, error) {
	t := h.t
	var loss store.ProcessLoss
	run, err := noRow(store.ScanRun(t.queryRow(ctx, "RunProcessLost", sql.Named("run", p.RunID), sql.Named("host", p.HostID),
		sql.Named("error", msg), sql.Named("now", t.now))))
	if err != nil || run == nil {
		return &loss, err
	}
	loss.Failed = run
	if run.Attempt != 1 || run.RetryOfRunID != nil {
		return &loss, nil
	}
	var held *string
	if err := t.queryRow(ctx, "RunHeldIssue", sql.Named("lost", run.ID), sql.Named("issue", run.IssueID)).
		Scan(&held); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("find the issue of run %s: %w", run.ID, err)
	}
	issue := run.IssueID
	if held != nil {
		issue = held
	}
	loss.Retry, err = h.InsertQueuedRun(ctx, &store.QueuedRun{ID: retryID, CompanyID: run.CompanyID, AgentID: run.AgentID,
		Reason: clasp.InvocationRetry, IssueID: deref(issue), RetryOfRunID: run.ID, Attempt: 2})
	if err != nil || loss.Retry == nil || held == nil {
		return &loss, err
	}
	rows, err := t.query(ctx, "RunMoveExecution", sql.Named("retry", retryID), sql.Named("lost", run.ID),
		sql.Named("issue", *held), sql.Named("now", t.now))
	if err != nil {
		return nil, fmt.Errorf("move locks of run %s: %w", run.ID, err)
	}
	moved, err := scanAll(rows, func(sc store.Row) (*store.IssueInCompany, error) {
		var m store.IssueInCompany
		return &m, sc.Scan(&m.ID, &m.CompanyID)
	})
	for _, m := range moved {
		loss.Moved = append(loss.Moved, *m)
	}
	return &loss, err
}

func (h hbtx) EndLostRun(ctx context.Context, run *clasp.Run) error {
	return h.t.releaseRunLocks(ctx, run, store.SystemActor)
}

func (h hbtx) CancelQueuedRuns(ctx context.Context, agentID string) ([]*clasp.Run, error) {
	rows, err := h.t.query(ctx, "RunCancelQueued", sql.Named("agent", agentID), sql.Named("now", h.t.now))
	if err != nil {
		return nil, err
	}
	return scanAll(rows, store.ScanRun)
}

func (h hbtx) SkipDeferredWakes(ctx context.Context, agentID string) error {
	_, err := h.t.exec(ctx, "WakeSkipDeferred", sql.Named("agent", agentID), sql.Named("now", h.t.now))
	return err
}

func (h hbtx) EndCancelledRuns(ctx context.Context, actor store.Actor, runs []*clasp.Run) error {
	for _, r := range runs {
		if err := h.t.releaseRunLocks(ctx, r, actor); err != nil {
			return err
		}
		if err := h.t.logActivity(ctx, r.CompanyID, actor, clasp.ActionRunFinished, "run", r.ID, map[string]any{
			"status": r.Status, "exitCode": r.ExitCode, "error": r.Error, "errorCode": r.ErrorCode,
		}); err != nil {
			return err
		}
	}
	return nil
}

func (h hbtx) DeadRuns(ctx context.Context, runIDs []string) ([]string, error) {
	ids, err := json.Marshal(runIDs)
	if err != nil {
		return nil, err
	}
	rows, err := h.t.query(ctx, "RunsDead", sql.Named("runs", string(ids)), sql.Named("now", h.t.now))
	if err != nil {
		return nil, err
	}
	return scanIDs(rows)
}

// promoteBlockedBy promotes the deferred wakes that waited for run runID
// (store.PromoteBlockedBy). Part of rule L6: it runs in the transaction
// that ended runID.
func (t *wtx) promoteBlockedBy(ctx context.Context, runID string) error {
	_, err := store.PromoteBlockedBy(ctx, hbtx{t}, []string{runID})
	return err
}

// AgentAdapterSet stores (or, Config nil, removes) an agent's adapter
// config (store.TxRunner.AgentAdapterSet).
func (s *Store) AgentAdapterSet(ctx context.Context, p *store.AgentAdapterSetParams) (*clasp.AdapterConfig, error) {
	return s.hb().AgentAdapterSet(ctx, p)
}

// AgentAdapterGet returns an agent's adapter config, nil when it has none. 404 not_found.
func (s *Store) AgentAdapterGet(ctx context.Context, agentID string) (*clasp.AdapterConfig, error) {
	var raw *string
	err := s.readRow(ctx, "AgentAdapterGet", sql.Named("agent", agentID)).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("agent", agentID)
	}
	if err != nil {
		return nil, translate(fmt.Errorf("get adapter of agent %s: %w", agentID, err))
	}
	return store.ParseAdapter(raw)
}

// AgentAdapterList returns every non-terminated agent with an adapter config.
func (s *Store) AgentAdapterList(ctx context.Context) ([]*store.AgentAdapter, error) {
	rows, err := s.read(ctx, "AgentAdapterList")
	if err != nil {
		return nil, translate(fmt.Errorf("list adapters: %w", err))
	}
	out, err := scanAll(rows, scanAgentAdapter)
	return out, translate(wrap(err, "list adapters"))
}

// Wake records a wake request and acts on it (store.TxRunner.Wake).
func (s *Store) Wake(ctx context.Context, p *store.WakeParams) (*store.WakeResult, error) {
	return s.hb().Wake(ctx, p)
}

// WakePromoteDeferred promotes the deferred wakes whose blocking run is
// dead (terminal, lost or missing): the catch-all for runs that ended
// without RunFinish (lease_expired). Returns how many wakes left deferred.
func (s *Store) WakePromoteDeferred(ctx context.Context) (int, error) {
	rows, err := s.read(ctx, "WakeBlockingDead", sql.Named("now", s.nowMicros()))
	if err != nil {
		return 0, translate(fmt.Errorf("find deferred wakes: %w", err))
	}
	ids, err := scanIDs(rows)
	if err != nil {
		return 0, translate(fmt.Errorf("find deferred wakes: %w", err))
	}
	return s.hb().WakePromoteDeferred(ctx, ids)
}

// RunQueuedManaged lists queued managed runs of active agents with an
// adapter, oldest first.
func (s *Store) RunQueuedManaged(ctx context.Context, limit int) ([]*store.ManagedRun, error) {
	rows, err := s.read(ctx, "RunQueuedManaged", sql.Named("limit", pageLimit(limit)))
	if err != nil {
		return nil, translate(fmt.Errorf("list queued runs: %w", err))
	}
	return scanAll(rows, scanManaged)
}

// RunRunningOnHost lists the running managed runs of hostID.
func (s *Store) RunRunningOnHost(ctx context.Context, hostID string) ([]*store.ManagedRun, error) {
	rows, err := s.read(ctx, "RunRunningOnHost", sql.Named("host", hostID))
	if err != nil {
		return nil, translate(fmt.Errorf("list running runs of host %s: %w", hostID, err))
	}
	return scanAll(rows, scanManaged)
}

// RunStart starts a queued run (store.TxRunner.RunStart).
func (s *Store) RunStart(ctx context.Context, p *store.RunStartParams) (*clasp.Run, error) {
	return s.hb().RunStart(ctx, p)
}

// RunSetProcess records the pid and process start time of a running run of hostID.
func (s *Store) RunSetProcess(ctx context.Context, runID, hostID string, pid int, procStart int64) error {
	return s.write(ctx, func(tx *wtx) error {
		res, err := tx.exec(ctx, "RunSetProcess", sql.Named("run", runID), sql.Named("host", hostID), sql.Named("pid", pid),
			sql.Named("proc_start", procStart))
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
		ttl = store.DefaultLeaseTTL
	}
	return s.write(ctx, func(tx *wtx) error {
		res, err := tx.exec(ctx, "RunRenew", sql.Named("run", runID), sql.Named("host", hostID), sql.Named("now", tx.now),
			sql.Named("ttl", ttl.Microseconds()))
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
// retry (store.TxRunner.RunProcessLost).
func (s *Store) RunProcessLost(ctx context.Context, p *store.RunProcessLostParams) (failed, retry *clasp.Run, err error) {
	return s.hb().RunProcessLost(ctx, p)
}

// AgentCancelQueuedRuns cancels an agent's queued runs (pausing it)
// (store.TxRunner.AgentCancelQueuedRuns).
func (s *Store) AgentCancelQueuedRuns(ctx context.Context, agentID string, actor store.Actor) (int, error) {
	return s.hb().AgentCancelQueuedRuns(ctx, agentID, actor)
}

// deref is *p, or "" for nil.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
