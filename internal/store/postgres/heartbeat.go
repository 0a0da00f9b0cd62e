package postgres

// Server-managed agents on PostgreSQL: the statements of
// store.HeartbeatTx (adapter configs, wake requests, the life cycle of the
// runs the heartbeat scheduler starts); the algorithms are
// store.TxRunner's. The wakes of one agent are serialised by a transaction
// advisory lock on the agent (coalescing and idempotency keys across
// replicas), the issue a wake decides on is locked FOR UPDATE, and a
// loss's retry is unique by retry_of_run_id.

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

// lockAgent serialises the heartbeat writes of one agent across replicas.
func lockAgent(ctx context.Context, tx pgx.Tx, agentID string) error {
	_, err := tx.Exec(ctx, q("AgentLock"), namedArgs{"agent": agentID})
	return wrap(err, "lock agent %s", agentID)
}

// scanManaged reads a ManagedRun (store.ScanManaged).
func scanManaged(sc store.Row) (*store.ManagedRun, error) {
	return store.ScanManaged(sc, func(sc store.Scanner) (*clasp.Run, error) { return store.ScanRun(sc) })
}

// scanAgentAdapter reads an agent and its adapter config (store.ScanAgentAdapter).
func scanAgentAdapter(sc store.Row) (*store.AgentAdapter, error) {
	return store.ScanAgentAdapter(sc, func(sc store.Scanner) (*clasp.Agent, error) { return store.ScanAgent(sc) })
}

// noRow is (nil, nil) for pgx.ErrNoRows, else (v, err).
func noRow[T any](v *T, err error) (*T, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return v, err
}

// hbtx is a transaction as store.HeartbeatTx.
type hbtx struct{ tx pgx.Tx }

// hb is a store transaction (s.tx: retried whole on a deadlock or
// serialization failure) as a store.TxRunner.
func (s *Store) hb() store.TxRunner {
	return func(ctx context.Context, fn func(store.HeartbeatTx) error) error {
		return s.tx(ctx, func(tx pgx.Tx) error { return fn(hbtx{tx}) })
	}
}

func (hbtx) NewID() string { return newUUIDv7() }

func (h hbtx) LogActivity(ctx context.Context, companyID string, actor store.Actor, action, entityType, entityID string, details any) error {
	return logActivity(ctx, h.tx, companyID, actor, action, entityType, entityID, details)
}

func (h hbtx) LockAgent(ctx context.Context, agentID string) error {
	return lockAgent(ctx, h.tx, agentID)
}

func (h hbtx) WakeByKey(ctx context.Context, agentID, key string) (*store.RecordedWake, error) {
	var w store.RecordedWake
	err := h.tx.QueryRow(ctx, q("WakeByKey"), namedArgs{"agent": agentID, "key": key}).
		Scan(&w.ID, &w.Status, &w.RunID, &w.BlockedByRunID, &w.RequestHash, &w.CompanyID)
	return noRow(&w, err)
}

func (h hbtx) IssueID(ctx context.Context, companyID, ref string) (string, error) {
	var id string
	rid, rident := splitRef(ref)
	err := h.tx.QueryRow(ctx, q("IssueRef"), namedArgs{"rid": rid, "rident": rident, "company": companyID}).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return id, err
}

func (h hbtx) AgentAdapter(ctx context.Context, agentID string) (*clasp.Agent, *clasp.AdapterConfig, error) {
	aa, err := scanAgentAdapter(h.tx.QueryRow(ctx, q("AgentWithAdapter"), namedArgs{"agent": agentID}))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, notFound("agent", agentID)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("get agent %s: %w", agentID, err)
	}
	return aa.Agent, aa.Config, nil
}

func (h hbtx) IssueLocks(ctx context.Context, issueID string) (*store.IssueLockState, error) {
	var l store.IssueLockState
	var status string
	err := h.tx.QueryRow(ctx, q("WakeIssueLocks"), namedArgs{"issue": issueID}).Scan(&status, &l.AssigneeAgentID, &l.CheckoutRunID, &l.ExecutionRunID)
	if err != nil {
		return nil, err
	}
	l.Status = clasp.IssueStatus(status)
	return &l, nil
}

func (h hbtx) QueuedRunFor(ctx context.Context, agentID, issueID string) (*clasp.Run, error) {
	return noRow(store.ScanRun(h.tx.QueryRow(ctx, q("WakeQueuedRun"), namedArgs{"agent": agentID, "issue": nullable(issueID)})))
}

func (h hbtx) TakeExecution(ctx context.Context, runID, agentID, issueID string) (bool, error) {
	tag, err := h.tx.Exec(ctx, q("WakeTakeExecution"), namedArgs{"run": runID, "agent": agentID, "issue": issueID})
	return tag.RowsAffected() > 0, err
}

func (h hbtx) InsertQueuedRun(ctx context.Context, r *store.QueuedRun) (*clasp.Run, error) {
	return noRow(store.ScanRun(h.tx.QueryRow(ctx, q("RunInsertQueued"), namedArgs{"id": r.ID, "company": r.CompanyID, "agent": r.AgentID,
		"source": r.Reason, "issue": nullable(r.IssueID), "retry_of": nullable(r.RetryOfRunID), "attempt": r.Attempt})))
}

func (h hbtx) RunGet(ctx context.Context, id string) (*clasp.Run, error) {
	r, err := store.ScanRun(h.tx.QueryRow(ctx, q("RunGet"), namedArgs{"id": id}))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound("run", id)
	}
	return r, err
}

func (h hbtx) InsertWake(ctx context.Context, w *store.WakeRecord) error {
	_, err := h.tx.Exec(ctx, q("WakeInsert"), namedArgs{"id": w.ID, "company": w.CompanyID, "agent": w.AgentID,
		"issue": nullable(w.IssueID), "reason": w.Reason, "key": nullable(w.IdempotencyKey), "status": w.Outcome, "run": w.RunID,
		"blocked_by": w.BlockedByRunID, "hash": w.RequestHash})
	return err
}

func (h hbtx) DeferredWakes(ctx context.Context, runIDs []string) ([]*store.DeferredWake, error) {
	rows, err := h.tx.Query(ctx, q("WakeDeferredList"), namedArgs{"runs": runIDs})
	if err != nil {
		return nil, err
	}
	return store.ScanAll(rows, func(sc store.Row) (*store.DeferredWake, error) {
		var w store.DeferredWake
		return &w, sc.Scan(&w.ID, &w.CompanyID, &w.AgentID, &w.IssueID, &w.Reason, &w.EndedRunID)
	})
}

func (h hbtx) SetWakeOutcome(ctx context.Context, wakeID, status string, runID, blockedBy *string) error {
	_, err := h.tx.Exec(ctx, q("WakePromote"), namedArgs{"id": wakeID, "status": status, "run": runID, "blocked_by": blockedBy})
	return err
}

func (h hbtx) SetAdapter(ctx context.Context, agentID string, cfg *string) (string, bool, error) {
	var company string
	err := h.tx.QueryRow(ctx, q("AgentAdapterSet"), namedArgs{"agent": agentID, "config": cfg}).Scan(&company)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	return company, err == nil, err
}

func (h hbtx) StartRun(ctx context.Context, p *store.RunStartParams, ttl time.Duration) (*clasp.Run, error) {
	return noRow(store.ScanRun(h.tx.QueryRow(ctx, q("RunStart"), namedArgs{"run": p.RunID, "host": p.HostID, "hash": nullable(p.TokenHash),
		"ttl_us": ttl.Microseconds(), "max": max(p.MaxRunning, 1)})))
}

func (h hbtx) AgentHeartbeat(ctx context.Context, agentID string) error {
	_, err := h.tx.Exec(ctx, q("AgentHeartbeat"), namedArgs{"agent": agentID})
	return err
}

// ProcessLost is the process-loss rule in one statement (RunProcessLost).
func (h hbtx) ProcessLost(ctx context.Context, p *store.RunProcessLostParams, msg, retryID string) (*store.ProcessLoss, error) {
	var lostJSON, retryJSON, movedJSON []byte
	if err := h.tx.QueryRow(ctx, q("RunProcessLost"), namedArgs{"run": p.RunID, "host": p.HostID, "error": msg,
		"retry_id": retryID}).Scan(&lostJSON, &retryJSON, &movedJSON); err != nil {
		return nil, err
	}
	var loss store.ProcessLoss
	if lostJSON == nil {
		return &loss, nil
	}
	var lj, rj jsonRun
	if err := json.Unmarshal(lostJSON, &lj); err != nil {
		return nil, err
	}
	loss.Failed = lj.run()
	if retryJSON == nil {
		return &loss, nil
	}
	if err := json.Unmarshal(retryJSON, &rj); err != nil {
		return nil, err
	}
	loss.Retry = rj.run()
	var moved [][2]string
	if err := json.Unmarshal(movedJSON, &moved); err != nil {
		return nil, err
	}
	for _, m := range moved {
		loss.Moved = append(loss.Moved, store.IssueInCompany{ID: m[0], CompanyID: m[1]})
	}
	return &loss, nil
}

func (h hbtx) EndLostRun(ctx context.Context, run *clasp.Run) error {
	return releaseRunLocks(ctx, h.tx, store.SystemActor, run.Status, []*clasp.Run{run})
}

func (h hbtx) CancelQueuedRuns(ctx context.Context, agentID string) ([]*clasp.Run, error) {
	rows, err := h.tx.Query(ctx, q("RunCancelQueued"), namedArgs{"agent": agentID})
	if err != nil {
		return nil, err
	}
	return store.ScanAll(rows, store.ScanRun)
}

func (h hbtx) SkipDeferredWakes(ctx context.Context, agentID string) error {
	_, err := h.tx.Exec(ctx, q("WakeSkipDeferred"), namedArgs{"agent": agentID})
	return err
}

func (h hbtx) EndCancelledRuns(ctx context.Context, actor store.Actor, runs []*clasp.Run) error {
	return releaseRunLocks(ctx, h.tx, actor, clasp.RunCancelled, runs)
}

func (h hbtx) DeadRuns(ctx context.Context, runIDs []string) ([]string, error) {
	rows, err := h.tx.Query(ctx, q("RunsDead"), namedArgs{"runs": runIDs})
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// promoteBlockedBy promotes the deferred wakes that waited for runs ids
// (store.PromoteBlockedBy). Part of rule L6: it runs in the transaction
// that ended the runs.
func promoteBlockedBy(ctx context.Context, tx pgx.Tx, ids []string) error {
	_, err := store.PromoteBlockedBy(ctx, hbtx{tx}, ids)
	return err
}

// AgentAdapterSet stores (Config nil: removes) an agent's adapter config
// (store.TxRunner.AgentAdapterSet).
func (s *Store) AgentAdapterSet(ctx context.Context, p *store.AgentAdapterSetParams) (*clasp.AdapterConfig, error) {
	return s.hb().AgentAdapterSet(ctx, p)
}

// AgentAdapterGet returns an agent's adapter config, nil when it has none. 404 not_found.
func (s *Store) AgentAdapterGet(ctx context.Context, agentID string) (*clasp.AdapterConfig, error) {
	var raw *string
	err := s.pool.QueryRow(ctx, q("AgentAdapterGet"), namedArgs{"agent": agentID}).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound("agent", agentID)
	}
	if err != nil {
		return nil, translate(fmt.Errorf("get adapter of agent %s: %w", agentID, err))
	}
	return store.ParseAdapter(raw)
}

// AgentAdapterList returns every non-terminated agent with an adapter config.
func (s *Store) AgentAdapterList(ctx context.Context) ([]*store.AgentAdapter, error) {
	rows, err := s.pool.Query(ctx, q("AgentAdapterList"), namedArgs{})
	if err != nil {
		return nil, translate(fmt.Errorf("list adapters: %w", err))
	}
	out, err := store.ScanAll(rows, scanAgentAdapter)
	return out, translate(wrap(err, "list adapters"))
}

// Wake records a wake request and acts on it (store.TxRunner.Wake).
func (s *Store) Wake(ctx context.Context, p *store.WakeParams) (*store.WakeResult, error) {
	return s.hb().Wake(ctx, p)
}

// WakePromoteDeferred promotes the deferred wakes whose blocking run is
// dead (store.TxRunner.WakePromoteDeferred).
func (s *Store) WakePromoteDeferred(ctx context.Context) (int, error) {
	rows, err := s.pool.Query(ctx, q("WakeBlockingDead"), namedArgs{})
	if err != nil {
		return 0, translate(fmt.Errorf("find deferred wakes: %w", err))
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, translate(fmt.Errorf("find deferred wakes: %w", err))
	}
	return s.hb().WakePromoteDeferred(ctx, ids)
}

// RunQueuedManaged lists queued managed runs of active agents with an adapter, oldest first.
func (s *Store) RunQueuedManaged(ctx context.Context, limit int) ([]*store.ManagedRun, error) {
	rows, err := s.pool.Query(ctx, q("RunQueuedManaged"), namedArgs{"limit": pageLimit(limit)})
	if err != nil {
		return nil, translate(fmt.Errorf("list queued runs: %w", err))
	}
	return store.ScanAll(rows, scanManaged)
}

// RunRunningOnHost lists the running managed runs of hostID.
func (s *Store) RunRunningOnHost(ctx context.Context, hostID string) ([]*store.ManagedRun, error) {
	rows, err := s.pool.Query(ctx, q("RunRunningOnHost"), namedArgs{"host": hostID})
	if err != nil {
		return nil, translate(fmt.Errorf("list running runs of host %s: %w", hostID, err))
	}
	return store.ScanAll(rows, scanManaged)
}

// RunStart starts a queued run (store.TxRunner.RunStart).
func (s *Store) RunStart(ctx context.Context, p *store.RunStartParams) (*clasp.Run, error) {
	return s.hb().RunStart(ctx, p)
}

// RunSetProcess records the pid and process start time of a running run of hostID.
func (s *Store) RunSetProcess(ctx context.Context, runID, hostID string, pid int, procStart int64) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, q("RunSetProcess"), namedArgs{"run": runID, "host": hostID, "pid": pid, "proc_start": procStart})
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
		ttl = store.DefaultLeaseTTL
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, q("RunRenew"), namedArgs{"run": runID, "host": hostID, "ttl_us": ttl.Microseconds()})
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
	return r
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
