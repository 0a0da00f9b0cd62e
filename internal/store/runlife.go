package store

// The life cycle of server-managed runs and agents' adapters, written once
// for both dialects (HeartbeatStore's rules). A dialect supplies
// HeartbeatTx: one statement a method, inside the transaction the
// algorithm runs in; each rule is one conditional statement, and the reads
// after a statement that matched nothing only explain the refusal.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/clasp-dev/clasp"
)

// DefaultLeaseTTL is the lease of a run when the caller gives none
// (clasp serve --lease-ttl defaults to 60 s).
const DefaultLeaseTTL = 60 * time.Second

// HeartbeatTx is WakeTx plus the statements of the managed runs' life
// cycle and of adapter configs, and the transaction's Querier for the
// algorithms that run named statements of their own (InstanceTakeOver).
// QueryTx implements the statements that are the same in every dialect.
type HeartbeatTx interface {
	WakeTx
	Querier
	// SetAdapter runs statement AgentAdapterSet: agentID's adapter config
	// becomes cfg (JSON; nil removes it) unless the agent is terminated.
	// ok is false (nothing written) when no row matched; company is the
	// agent's company.
	SetAdapter(ctx context.Context, agentID string, cfg *string) (company string, ok bool, err error)
	// StartRun runs statement RunStart (see HeartbeatStore.RunStart) with
	// lease ttl; nil when it matched nothing.
	StartRun(ctx context.Context, p *RunStartParams, ttl time.Duration) (*clasp.Run, error)
	// AgentHeartbeat records agentID's heartbeat (last_heartbeat_at = now).
	AgentHeartbeat(ctx context.Context, agentID string) error
	// ProcessLost runs the process-loss rule (statements RunProcessLost and
	// the ones that hand the lost run's execution lock to its retry, see
	// HeartbeatStore.RunProcessLost) with error message msg and retryID for
	// the retry run; Failed is nil when the run is not a running managed
	// run of p.HostID.
	ProcessLost(ctx context.Context, p *RunProcessLostParams, msg, retryID string) (*ProcessLoss, error)
	// ReleaseRunLocks is rule L6 for runs this transaction has just ended
	// with status (statement ReleaseRunLocks): every lock naming them is
	// cleared with one issue.lock_released {runId, runStatus} per issue
	// and, when finished, one run.finished {status, exitCode, error, and
	// errorCode when set} per run, from the run's row as ended; each run's
	// rows together, in run id order. The issues' status stays (their
	// assignee may adopt them, L1). The wakes deferred behind the runs are
	// the caller's (releaseRunLocks).
	ReleaseRunLocks(ctx context.Context, actor Actor, status clasp.RunStatus, runs []*clasp.Run, finished bool) error
	// CancelQueuedRuns runs statement AgentCancelQueuedRuns: agentID's
	// queued runs become cancelled (agent_paused); it returns them.
	CancelQueuedRuns(ctx context.Context, agentID string) ([]*clasp.Run, error)
	// SkipDeferredWakes runs statement WakeSkipDeferred: agentID's deferred
	// wakes become skipped.
	SkipDeferredWakes(ctx context.Context, agentID string) error
	// UnassignIssues is rule L6 for agent agentID being terminated
	// (statement AgentUnassignIssues): every issue assigned to it that is
	// not done or cancelled loses its assignee and any lock left on it,
	// in_progress becoming todo, with its activity rows (issue.released
	// when a lock was cleared, then issue.updated, cause agent_terminated)
	// attributed to actor.
	UnassignIssues(ctx context.Context, agentID string, actor Actor) error
	// DeadRuns returns those of runIDs that are not live (terminal, lost or
	// missing) as of now.
	DeadRuns(ctx context.Context, runIDs []string) ([]string, error)
}

// ProcessLoss is what the process-loss rule changed (HeartbeatTx.ProcessLost).
type ProcessLoss struct {
	Failed *clasp.Run       // nil: the run was not a running managed run of the host
	Retry  *clasp.Run       // the queued retry, nil when there is none
	Moved  []IssueInCompany // the issues whose execution lock moved to Retry
}

// IssueInCompany names an issue and its company (for activity rows).
type IssueInCompany struct{ ID, CompanyID string }

// TxRunner runs fn in one write transaction of a dialect and commits it
// when fn returns nil (PostgreSQL: retrying the whole function on a
// deadlock or serialization failure, so fn may run more than once).
type TxRunner func(ctx context.Context, fn func(HeartbeatTx) error) error

// Wake records wake request p and acts on it, in one transaction (see
// WakeParams for the outcomes, in the order they are decided). Errors: 400
// invalid_request (WakeParams.Validate), 404 not_found (the agent, also
// for an agent caller of another company; an issue not of the agent's
// company), WakeIssueRefusal's 409/422, 422 idempotency_key_reused
// (ErrWakeKeyReused).
func (run TxRunner) Wake(ctx context.Context, p *WakeParams) (*WakeResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var out *WakeResult
	err := run(ctx, func(tx HeartbeatTx) error {
		var err error
		out, err = wake(ctx, tx, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AgentAdapterSet stores (p.Config nil: removes) an agent's adapter config
// after Normalize, in one conditional write (not for a terminated agent).
// Returns the config stored. Errors: 400 invalid_request (Normalize), 404
// not_found, 422 precondition_failed for a terminated agent. Activity
// agent.adapter_set {adapterType}.
func (run TxRunner) AgentAdapterSet(ctx context.Context, p *AgentAdapterSetParams) (*clasp.AdapterConfig, error) {
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
		cfg, typ = Optional(string(b)), p.Config.Type
	}
	err := run(ctx, func(tx HeartbeatTx) error {
		company, ok, err := tx.SetAdapter(ctx, p.AgentID, cfg)
		if err != nil {
			return fmt.Errorf("set adapter of agent %s: %w", p.AgentID, err)
		}
		if !ok {
			a, _, err := tx.AgentAdapter(ctx, p.AgentID)
			if err != nil {
				return err
			}
			return clasp.Errorf(clasp.CodePreconditionFailed, "Agent %s is terminated: its adapter cannot change.", a.ID)
		}
		return tx.LogActivity(ctx, company, p.Actor, clasp.ActionAgentAdapterSet, "agent", p.AgentID, map[string]any{"adapterType": typ})
	})
	if err != nil {
		return nil, err
	}
	return p.Config, nil
}

// ParseAdapter decodes an adapter config as stored (nil: none).
func ParseAdapter(raw *string) (*clasp.AdapterConfig, error) {
	if raw == nil {
		return nil, nil
	}
	var c clasp.AdapterConfig
	if err := json.Unmarshal([]byte(*raw), &c); err != nil {
		return nil, fmt.Errorf("adapter config: %w", err)
	}
	return &c, nil
}

// promoteDeferred promotes the deferred wakes blocked by runs blocking
// (read before the transaction) that are still dead inside it (see
// PromoteBlockedBy). Returns how many wakes left deferred.
func (run TxRunner) promoteDeferred(ctx context.Context, blocking []string) (int, error) {
	if len(blocking) == 0 {
		return 0, nil
	}
	n := 0
	err := run(ctx, func(tx HeartbeatTx) error {
		dead, err := tx.DeadRuns(ctx, blocking)
		if err != nil {
			return fmt.Errorf("find dead runs: %w", err)
		}
		n, err = PromoteBlockedBy(ctx, tx, dead)
		return err
	})
	return n, err
}

// RunStart makes queued run p.RunID running on p.HostID (see
// HeartbeatStore.RunStart) in one conditional write, then records its
// agent's heartbeat and run.started (actor system). Errors: 404 not_found,
// 409 run_not_live when the run is no longer queued, 422
// precondition_failed with details.reason no_free_slot or agent_not_active.
func (run TxRunner) RunStart(ctx context.Context, p *RunStartParams) (*clasp.Run, error) {
	ttl := cmp.Or(p.LeaseTTL, DefaultLeaseTTL)
	if ttl < 0 {
		ttl = DefaultLeaseTTL
	}
	var out *clasp.Run
	err := run(ctx, func(tx HeartbeatTx) error {
		cur, err := tx.RunGet(ctx, p.RunID)
		if err != nil {
			return err
		}
		if err := tx.LockAgent(ctx, cur.AgentID); err != nil { // the slot count, across replicas
			return fmt.Errorf("lock agent %s: %w", cur.AgentID, err)
		}
		r, err := tx.StartRun(ctx, p, ttl)
		if err != nil {
			return fmt.Errorf("start run %s: %w", p.RunID, err)
		}
		if r == nil {
			return runStartRefused(ctx, tx, p.RunID)
		}
		out = r
		if err := tx.AgentHeartbeat(ctx, r.AgentID); err != nil {
			return fmt.Errorf("heartbeat of agent %s: %w", r.AgentID, err)
		}
		return tx.LogActivity(ctx, r.CompanyID, SystemActor, clasp.ActionRunStarted, "run", r.ID, map[string]any{
			"agentId": r.AgentID, "issueId": r.IssueID, "invocationSource": r.InvocationSource, "hostId": p.HostID,
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// runStartRefused explains a RunStart that matched nothing, from the run
// and its agent as they are now.
func runStartRefused(ctx context.Context, tx HeartbeatTx, runID string) error {
	cur, err := tx.RunGet(ctx, runID)
	if err != nil {
		return err
	}
	if cur.Status != clasp.RunQueued {
		return clasp.Errorf(clasp.CodeRunNotLive, "Run %s is %s, not queued.", cur.ID, cur.Status).WithDetails("runId", cur.ID)
	}
	a, _, err := tx.AgentAdapter(ctx, cur.AgentID)
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

// RunProcessLost fails a running managed run whose process is gone and
// queues its one retry (see HeartbeatStore.RunProcessLost), then writes
// run.lost, run.queued for the retry and issue.lock_moved for each issue
// whose execution lock moved to it (actor system), and releases the other
// locks naming the lost run (L6). 409 run_not_live when the run is not a
// running managed run of p.HostID.
func (run TxRunner) RunProcessLost(ctx context.Context, p *RunProcessLostParams) (failed, retry *clasp.Run, err error) {
	msg := cmp.Or(p.Error, "process lost: the run's process is gone")
	err = run(ctx, func(tx HeartbeatTx) error {
		failed, retry = nil, nil
		loss, err := tx.ProcessLost(ctx, p, msg, tx.NewID())
		if err != nil {
			return fmt.Errorf("process lost of run %s: %w", p.RunID, err)
		}
		if loss.Failed == nil {
			return clasp.Errorf(clasp.CodeRunNotLive, "Run %s is not a running managed run of this host.", p.RunID).
				WithDetails("runId", p.RunID)
		}
		failed, retry = loss.Failed, loss.Retry
		if err := tx.LogActivity(ctx, failed.CompanyID, SystemActor, clasp.ActionRunLost, "run", failed.ID, map[string]any{
			"agentId": failed.AgentID, "errorCode": clasp.RunErrorProcessLost, "pid": failed.PID, "attempt": failed.Attempt,
		}); err != nil {
			return err
		}
		if retry != nil {
			if err := logRunQueued(ctx, tx, retry, SystemActor); err != nil {
				return err
			}
			for _, m := range loss.Moved {
				if err := tx.LogActivity(ctx, m.CompanyID, SystemActor, clasp.ActionIssueLockMoved, "issue", m.ID, map[string]any{
					"fromRunId": failed.ID, "toRunId": retry.ID, "clearedCheckoutRunId": failed.ID,
				}); err != nil {
					return err
				}
			}
		}
		return releaseRunLocks(ctx, tx, SystemActor, failed.Status, []*clasp.Run{failed}, false) // run.lost says it ended
	})
	if err != nil {
		return nil, nil, err
	}
	return failed, retry, nil
}

// AgentCancelQueuedRuns cancels agent agentID's queued runs (pausing it):
// each ends as cancelled (agent_paused), the agent's deferred wakes are
// skipped, then the runs' locks are released (L6) with one run.finished
// each. Returns how many runs it cancelled.
func (run TxRunner) AgentCancelQueuedRuns(ctx context.Context, agentID string, actor Actor) (int, error) {
	n := 0
	err := run(ctx, func(tx HeartbeatTx) error {
		if err := tx.LockAgent(ctx, agentID); err != nil {
			return fmt.Errorf("lock agent %s: %w", agentID, err)
		}
		runs, err := tx.CancelQueuedRuns(ctx, agentID)
		if err != nil {
			return fmt.Errorf("cancel queued runs of agent %s: %w", agentID, err)
		}
		n = len(runs)
		if err := tx.SkipDeferredWakes(ctx, agentID); err != nil {
			return fmt.Errorf("skip deferred wakes of agent %s: %w", agentID, err)
		}
		if len(runs) == 0 {
			return nil
		}
		return releaseRunLocks(ctx, tx, actor, clasp.RunCancelled, runs, true)
	})
	return n, err
}

// scanManaged reads a ManagedRun: a RunCols row, then proc_start.
func scanManaged(sc Row) (*ManagedRun, error) {
	var m ManagedRun
	var r clasp.Run
	if err := sc.Scan(append(RunDest(&r), &m.ProcStart)...); err != nil {
		return nil, err
	}
	m.Run, m.WakeReason = &r, r.InvocationSource
	return &m, nil
}

// scanAgentAdapter reads an AgentAdapter: an AgentCols row, then
// adapter_config (NULL: no adapter).
func scanAgentAdapter(sc Row) (*AgentAdapter, error) {
	var a clasp.Agent
	var raw *string
	if err := sc.Scan(append(AgentDest(&a), &raw)...); err != nil {
		return nil, err
	}
	c, err := ParseAdapter(raw)
	if err != nil {
		return nil, err
	}
	return &AgentAdapter{Agent: &a, Config: c}, nil
}
