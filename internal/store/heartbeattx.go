package store

// The statements of HeartbeatTx and the HeartbeatStore methods that run
// one statement each, written once on a dialect's Querier and Driver
// (driver.go). A dialect keeps only what truly differs: how it opens a
// transaction (TxRunner), how it serialises one agent's writes
// (LockAgent), how it writes activity rows, and the rules whose statements
// differ in number between the dialects (ProcessLost,
// ReleaseRunLocks, UnassignIssues).

import (
	"context"
	"fmt"
	"time"

	"github.com/clasp-dev/clasp"
)

// TxDriver is the part of HeartbeatTx whose statements differ between the
// dialects (in number, or in how they lock): Driver.HeartbeatWrite gives
// it for the transaction it opens. The methods are HeartbeatTx's.
type TxDriver interface {
	LogActivity(ctx context.Context, companyID string, actor Actor, action, entityType, entityID string, details any) error
	LockAgent(ctx context.Context, agentID string) error
	IssueID(ctx context.Context, companyID, ref string) (string, error)
	ProcessLost(ctx context.Context, p *RunProcessLostParams, msg, retryID string) (*ProcessLoss, error)
	ReleaseRunLocks(ctx context.Context, actor Actor, status clasp.RunStatus, runs []*clasp.Run, finished bool) error
	UnassignIssues(ctx context.Context, agentID string, actor Actor) error
}

// NewHeartbeatTx returns the HeartbeatTx of one transaction: the
// statements every dialect shares run on q (the transaction's Querier), d
// tells a no-row error and makes ids, and x runs the rest.
// When x writes activity rows from Go (activityWriter: SQLite), so
// does the transaction.
func NewHeartbeatTx(q Querier, d Driver, x TxDriver) HeartbeatTx {
	tx := heartbeatTx{queryTx{Querier: q, Driver: d}, x}
	if w, ok := x.(activityWriter); ok {
		return activityTx{tx, w}
	}
	return tx
}

// heartbeatTx is NewHeartbeatTx's HeartbeatTx.
type heartbeatTx struct {
	queryTx
	TxDriver
}

// activityTx is a heartbeatTx whose dialect writes activity rows from Go.
type activityTx struct {
	heartbeatTx
	activityWriter
}

// queryTx implements the statements of HeartbeatTx that are the same in
// every dialect, each one named statement run on Querier (the current
// transaction's); Driver tells a no-row error and makes ids. Unexpected
// database errors are returned as they are (the caller wraps them).
type queryTx struct {
	Querier
	Driver Driver
}

// orNone is (nil, nil) when err is d's no-row error, else (v, err).
func orNone[T any](d Driver, v *T, err error) (*T, error) {
	if d.NoRows(err) {
		return nil, nil
	}
	return v, err
}

// runOrNone runs the named statement for a RunCols row: nil (no error)
// when it returned none.
func (t queryTx) runOrNone(ctx context.Context, name string, args Args) (*clasp.Run, error) {
	r, err := ScanRun(t.QueryRow(ctx, name, args))
	return orNone(t.Driver, r, err)
}

// NewID returns a fresh id (Driver.NewID).
func (t queryTx) NewID() string { return t.Driver.NewID() }

// WakeByKey runs statement WakeByKey (WakeTx.WakeByKey).
func (t queryTx) WakeByKey(ctx context.Context, agentID, key string) (*RecordedWake, error) {
	var w RecordedWake
	err := t.QueryRow(ctx, "WakeByKey", Args{"agent": agentID, "key": key}).
		Scan(&w.ID, &w.Status, &w.RunID, &w.BlockedByRunID, &w.RequestHash, &w.CompanyID)
	return orNone(t.Driver, &w, err)
}

// AgentAdapter runs statement AgentWithAdapter (WakeTx.AgentAdapter).
func (t queryTx) AgentAdapter(ctx context.Context, agentID string) (*clasp.Agent, *clasp.AdapterConfig, error) {
	aa, err := scanAgentAdapter(t.QueryRow(ctx, "AgentWithAdapter", Args{"agent": agentID}))
	if t.Driver.NoRows(err) {
		return nil, nil, ErrNotFound("agent", agentID)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("get agent %s: %w", agentID, err)
	}
	return aa.Agent, aa.Config, nil
}

// IssueLocks runs statement WakeIssueLocks (WakeTx.IssueLocks).
func (t queryTx) IssueLocks(ctx context.Context, issueID string) (*IssueLockState, error) {
	var l IssueLockState
	err := t.QueryRow(ctx, "WakeIssueLocks", Args{"issue": issueID}).
		Scan(&l.Status, &l.AssigneeAgentID, &l.CheckoutRunID, &l.ExecutionRunID, &l.Escalated)
	if err != nil {
		return nil, err
	}
	return &l, nil
}

// QueuedRunFor runs statement WakeQueuedRun (WakeTx.QueuedRunFor).
func (t queryTx) QueuedRunFor(ctx context.Context, agentID, issueID string) (*clasp.Run, error) {
	return t.runOrNone(ctx, "WakeQueuedRun", Args{"agent": agentID, "issue": nullable(issueID)})
}

// TakeExecution runs statement WakeTakeExecution (WakeTx.TakeExecution).
func (t queryTx) TakeExecution(ctx context.Context, runID, agentID, issueID string) (bool, error) {
	n, err := t.Exec(ctx, "WakeTakeExecution", Args{"run": runID, "agent": agentID, "issue": issueID})
	return n > 0, err
}

// InsertQueuedRun runs statement RunInsertQueued (WakeTx.InsertQueuedRun).
func (t queryTx) InsertQueuedRun(ctx context.Context, r *QueuedRun) (*clasp.Run, error) {
	return t.runOrNone(ctx, "RunInsertQueued", Args{"id": r.ID, "company": r.CompanyID, "agent": r.AgentID,
		"source": r.Reason, "issue": nullable(r.IssueID), "retry_of": nullable(r.RetryOfRunID), "attempt": r.Attempt})
}

// RunGet runs statement RunGet (WakeTx.RunGet).
func (t queryTx) RunGet(ctx context.Context, id string) (*clasp.Run, error) {
	return runGet(ctx, t.Querier, t.Driver, id)
}

func runGet(ctx context.Context, q Querier, d Driver, id string) (*clasp.Run, error) {
	r, err := ScanRun(q.QueryRow(ctx, "RunGet", Args{"id": id}))
	if d.NoRows(err) {
		return nil, ErrNotFound("run", id)
	}
	return r, Wrap(err, "get run %s", id)
}

// InsertWake runs statement WakeInsert (WakeTx.InsertWake).
func (t queryTx) InsertWake(ctx context.Context, w *WakeRecord) error {
	_, err := t.Exec(ctx, "WakeInsert", Args{"id": w.ID, "company": w.CompanyID, "agent": w.AgentID,
		"issue": nullable(w.IssueID), "reason": w.Reason, "key": nullable(w.IdempotencyKey), "status": w.Outcome, "run": w.RunID,
		"blocked_by": w.BlockedByRunID, "hash": w.RequestHash})
	return err
}

// DeferredWakes runs statement WakeDeferredList (WakeTx.DeferredWakes).
func (t queryTx) DeferredWakes(ctx context.Context, runIDs []string) ([]*DeferredWake, error) {
	return queryAll(ctx, t.Querier, "WakeDeferredList", Args{"runs": runIDs}, func(sc Row) (*DeferredWake, error) {
		var w DeferredWake
		return &w, sc.Scan(&w.ID, &w.CompanyID, &w.AgentID, &w.IssueID, &w.Reason, &w.EndedRunID)
	})
}

// SetWakeOutcome runs statement WakePromote (WakeTx.SetWakeOutcome).
func (t queryTx) SetWakeOutcome(ctx context.Context, wakeID, status string, runID, blockedBy *string) error {
	_, err := t.Exec(ctx, "WakePromote", Args{"id": wakeID, "status": status, "run": runID, "blocked_by": blockedBy})
	return err
}

// SetAdapter runs statement AgentAdapterSet (HeartbeatTx.SetAdapter).
func (t queryTx) SetAdapter(ctx context.Context, agentID string, cfg *string) (string, bool, error) {
	var company string
	err := t.QueryRow(ctx, "AgentAdapterSet", Args{"agent": agentID, "config": cfg}).Scan(&company)
	if t.Driver.NoRows(err) {
		return "", false, nil
	}
	return company, err == nil, err
}

// StartRun runs statement RunStart (HeartbeatTx.StartRun).
func (t queryTx) StartRun(ctx context.Context, p *RunStartParams, ttl time.Duration) (*clasp.Run, error) {
	return t.runOrNone(ctx, "RunStart", Args{"run": p.RunID, "host": p.HostID, "hash": nullable(p.TokenHash),
		"ttl_us": ttl.Microseconds(), "max": max(p.MaxRunning, 1)})
}

// AgentHeartbeat runs statement AgentHeartbeat (HeartbeatTx.AgentHeartbeat).
func (t queryTx) AgentHeartbeat(ctx context.Context, agentID string) error {
	_, err := t.Exec(ctx, "AgentHeartbeat", Args{"agent": agentID})
	return err
}

// CancelQueuedRuns runs statement RunCancelQueued (HeartbeatTx.CancelQueuedRuns).
func (t queryTx) CancelQueuedRuns(ctx context.Context, agentID string) ([]*clasp.Run, error) {
	return queryAll(ctx, t.Querier, "RunCancelQueued", Args{"agent": agentID}, ScanRun)
}

// SkipDeferredWakes runs statement WakeSkipDeferred (HeartbeatTx.SkipDeferredWakes).
func (t queryTx) SkipDeferredWakes(ctx context.Context, agentID string) error {
	_, err := t.Exec(ctx, "WakeSkipDeferred", Args{"agent": agentID})
	return err
}

// DeadRuns runs statement RunsDead (HeartbeatTx.DeadRuns).
func (t queryTx) DeadRuns(ctx context.Context, runIDs []string) ([]string, error) {
	return queryIDs(ctx, t.Querier, "RunsDead", Args{"runs": runIDs})
}

// queryIDs runs the named statement on q and reads its one column of
// strings.
func queryIDs(ctx context.Context, q Querier, name string, args Args) ([]string, error) {
	rows, err := q.Query(ctx, name, args)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// Heartbeat implements, once, the HeartbeatStore methods whose algorithm
// is the same in every dialect, on a dialect's Driver and its transactions
// (runlife.go, wake.go), and the agent writes that end runs (agents.go).
// DB embeds it (NewHeartbeat).
type Heartbeat struct {
	TxRunner
	d Driver
}

// NewHeartbeat returns the shared HeartbeatStore methods, running their
// reads and one-statement writes on d and their transactions on tx.
func NewHeartbeat(d Driver) Heartbeat {
	return Heartbeat{d: d, TxRunner: func(ctx context.Context, fn func(HeartbeatTx) error) error {
		return d.HeartbeatWrite(ctx, func(q Querier, x TxDriver) error { return fn(NewHeartbeatTx(q, d, x)) })
	}}
}

// AgentAdapterGet returns an agent's adapter config (statement
// AgentAdapterGet), nil when it has none. 404 not_found.
func (h Heartbeat) AgentAdapterGet(ctx context.Context, agentID string) (*clasp.AdapterConfig, error) {
	var raw *string
	err := h.d.Read().QueryRow(ctx, "AgentAdapterGet", Args{"agent": agentID}).Scan(&raw)
	if h.d.NoRows(err) {
		return nil, ErrNotFound("agent", agentID)
	}
	if err != nil {
		return nil, h.d.Translate(fmt.Errorf("get adapter of agent %s: %w", agentID, err))
	}
	return ParseAdapter(raw)
}

// AgentAdapterList returns every non-terminated agent with an adapter
// config (statement AgentAdapterList).
func (h Heartbeat) AgentAdapterList(ctx context.Context) ([]*AgentAdapter, error) {
	out, err := queryAll(ctx, h.d.Read(), "AgentAdapterList", Args{}, scanAgentAdapter)
	return out, h.d.Translate(Wrap(err, "list adapters"))
}

// WakePromoteDeferred promotes the deferred wakes whose blocking run is
// dead (terminal, lost or missing; statement WakeBlockingDead, then
// the promotion in one transaction): the catch-all for runs that ended without
// RunFinish (lease_expired). Returns how many wakes left deferred.
func (h Heartbeat) WakePromoteDeferred(ctx context.Context) (int, error) {
	ids, err := queryIDs(ctx, h.d.Read(), "WakeBlockingDead", Args{})
	if err != nil {
		return 0, h.d.Translate(fmt.Errorf("find deferred wakes: %w", err))
	}
	return h.promoteDeferred(ctx, ids)
}

// RunGet returns a run (statement RunGet); 404 not_found.
func (h Heartbeat) RunGet(ctx context.Context, id string) (*clasp.Run, error) {
	r, err := runGet(ctx, h.d.Read(), h.d, id)
	return r, h.d.Translate(err)
}

// RunQueuedManaged lists queued managed runs of active agents with an
// adapter, oldest first, at most limit (statement RunQueuedManaged).
func (h Heartbeat) RunQueuedManaged(ctx context.Context, limit int) ([]*ManagedRun, error) {
	out, err := queryAll(ctx, h.d.Read(), "RunQueuedManaged", Args{"limit": PageLimit(limit)}, scanManaged)
	return out, h.d.Translate(Wrap(err, "list queued runs"))
}

// RunRunningOnHost lists the running managed runs of hostID (statement
// RunRunningOnHost).
func (h Heartbeat) RunRunningOnHost(ctx context.Context, hostID string) ([]*ManagedRun, error) {
	out, err := queryAll(ctx, h.d.Read(), "RunRunningOnHost", Args{"host": hostID}, scanManaged)
	return out, h.d.Translate(Wrap(err, "list running runs of host %s", hostID))
}

// RunSetProcess records the pid and process start time of a running run
// of hostID (statement RunSetProcess). 409 run_not_live when it is not
// running on hostID.
func (h Heartbeat) RunSetProcess(ctx context.Context, runID, hostID string, pid int, procStart int64) error {
	return h.write(ctx, "RunSetProcess", Args{"run": runID, "host": hostID, "pid": pid, "proc_start": procStart},
		"record process of run "+runID, clasp.Errorf(clasp.CodeRunNotLive, "Run %s is not running on this host.", runID).WithDetails("runId", runID))
}

// RunRenew renews the lease of a live running run of hostID to ttl
// (DefaultLeaseTTL when not positive) from now (statement RunRenew). 409
// run_not_live.
func (h Heartbeat) RunRenew(ctx context.Context, runID, hostID string, ttl time.Duration) error {
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	return h.write(ctx, "RunRenew", Args{"run": runID, "host": hostID, "ttl_us": ttl.Microseconds()},
		"renew run "+runID, clasp.Errorf(clasp.CodeRunNotLive, "Run %s is not live on this host.", runID).WithDetails("runId", runID))
}

// quietWriter is a Driver whose Write also wakes the activity watchers
// (PostgreSQL, across replicas): WriteQuiet is Write without that, for
// statements that never write an activity row.
type quietWriter interface {
	WriteQuiet(ctx context.Context, fn func(Querier) error) error
}

// writeQuiet is d's write for statements that write no activity row:
// WriteQuiet when d has it, else Write.
func writeQuiet(d Driver) func(ctx context.Context, fn func(Querier) error) error {
	if qw, ok := d.(quietWriter); ok {
		return qw.WriteQuiet
	}
	return d.Write
}

// write runs the named statement, which writes no activity row, as one
// write (writeQuiet): what names it in an unexpected error, none (nil: no
// error) is the error when it changed no row.
func (h Heartbeat) write(ctx context.Context, name string, args Args, what string, none error) error {
	return writeQuiet(h.d)(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, name, args)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if n == 0 && none != nil {
			return none
		}
		return nil
	})
}

// InstanceRegister records (or replaces) instance in with a lease of ttl
// (statement InstanceRegister).
func (h Heartbeat) InstanceRegister(ctx context.Context, in *Instance, ttl time.Duration) error {
	return h.write(ctx, "InstanceRegister", Args{"id": in.ID, "host": in.Host, "pid": in.PID, "proc_start": in.ProcStart,
		"ttl_us": ttl.Microseconds()}, "register instance "+in.ID, nil)
}

// InstanceRenew extends instance id's lease to ttl from now (statement
// InstanceRenew); 404 not_found when it is gone.
func (h Heartbeat) InstanceRenew(ctx context.Context, id string, ttl time.Duration) error {
	return h.write(ctx, "InstanceRenew", Args{"id": id, "ttl_us": ttl.Microseconds()}, "renew instance "+id,
		ErrNotFound("instance", id))
}

// InstanceRelease ends instance id's lease now (statement InstanceRelease).
func (h Heartbeat) InstanceRelease(ctx context.Context, id string) error {
	return h.write(ctx, "InstanceRelease", Args{"id": id}, "release instance "+id, nil)
}

// InstanceList lists the instances of host (statement InstanceList).
func (h Heartbeat) InstanceList(ctx context.Context, host string) ([]*Instance, error) {
	out, err := queryAll(ctx, h.d.Read(), "InstanceList", Args{"host": host}, func(sc Row) (*Instance, error) {
		var in Instance
		return &in, sc.Scan(&in.ID, &in.Host, &in.PID, &in.ProcStart, Time(&in.StartedAt), Time(&in.LeaseExpiresAt), &in.Expired)
	})
	return out, h.d.Translate(Wrap(err, "list instances of %s", host))
}

// InstanceTakeOver takes instance dead over for by (see
// HeartbeatStore.InstanceTakeOver), in one transaction: statement
// InstanceTakeOver, a compare-and-set on dead's lease (ok false, nothing
// else done, when another instance came first or dead renewed), then
// InstanceRunsWithProcess (the runs returned) and InstanceMoveRuns. 400
// invalid_request (CheckTakeOver).
func (h Heartbeat) InstanceTakeOver(ctx context.Context, dead *Instance, by string) (runs []*ManagedRun, ok bool, err error) {
	if err := CheckTakeOver(dead, by); err != nil {
		return nil, false, err
	}
	err = h.TxRunner(ctx, func(tx HeartbeatTx) error {
		runs, ok = nil, false
		n, err := tx.Exec(ctx, "InstanceTakeOver", Args{"id": dead.ID, "lease": dead.LeaseExpiresAt})
		if err != nil || n == 0 {
			return Wrap(err, "take over instance %s", dead.ID)
		}
		ok = true
		if runs, err = queryAll(ctx, tx, "InstanceRunsWithProcess", Args{"host": dead.ID}, scanManaged); err != nil {
			return fmt.Errorf("list runs of instance %s: %w", dead.ID, err)
		}
		_, err = tx.Exec(ctx, "InstanceMoveRuns", Args{"by": by, "dead": dead.ID})
		return Wrap(err, "move runs of instance %s", dead.ID)
	})
	if err != nil {
		return nil, false, h.d.Translate(err)
	}
	return runs, ok, nil
}
