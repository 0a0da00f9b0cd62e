package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/clasp-dev/clasp"
)

// HeartbeatStore is what the heartbeat scheduler (internal/heartbeat)
// needs besides Store: agent adapter configs, wake requests, and
// the life cycle of server-managed runs. Both stores implement it; the
// storetest suite RunHeartbeat pins it. Every rule below is one conditional
// statement (plus its activity rows) in one transaction, as the lock rules.
type HeartbeatStore interface {
	Store

	// AgentAdapterSet stores (Config nil: removes) an agent's adapter
	// config, validated by clasp.AdapterConfig.Normalize (400
	// invalid_request). 404 not_found; 422 precondition_failed for a
	// terminated agent. Activity agent.adapter_set.
	AgentAdapterSet(ctx context.Context, p *AgentAdapterSetParams) (*clasp.AdapterConfig, error)
	// AgentAdapterGet returns an agent's adapter config, nil when it has none. 404 not_found.
	AgentAdapterGet(ctx context.Context, agentID string) (*clasp.AdapterConfig, error)
	// AgentAdapterList returns every non-terminated agent with an adapter config.
	AgentAdapterList(ctx context.Context) ([]*AgentAdapter, error)

	// Wake records a wake request and acts on it in the same transaction
	// (see WakeParams for the outcomes).
	Wake(ctx context.Context, p *WakeParams) (*WakeResult, error)
	// WakePromoteDeferred promotes, for each issue whose execution lock no
	// longer names a live run, its oldest deferred wake (a queued run that
	// takes the execution lock); a catch-all for runs that died without a
	// RunFinish (lease_expired). RunFinish and RunProcessLost promote in
	// their own transaction (rule L6). Returns how many it promoted.
	WakePromoteDeferred(ctx context.Context) (int, error)
	// DependencyWakesDeliver sends the dependency wakes that are due
	// (RULES.md, Dependencies): for each issue whose blockers are all
	// resolved in a ready state not yet woken, one wake of its assignee
	// agent with reason issue_blockers_resolved; for each parent whose
	// children are all closed in a state not yet woken and that is not
	// blocked, one issue_children_completed wake. Each is a
	// compare-and-set on the issue's generation columns in the wake's own
	// transaction, so that any number of callers on any number of
	// replicas send each ready state's wake once. At most limit issues a
	// call; it returns how many wakes it sent.
	DependencyWakesDeliver(ctx context.Context, limit int) (int, error)

	// RunQueuedManaged lists queued server-managed runs of active agents
	// with an adapter, oldest first, at most limit.
	RunQueuedManaged(ctx context.Context, limit int) ([]*ManagedRun, error)
	// RunStart makes a queued run running on HostID, with a lease of
	// LeaseTTL and the run token's hash, if its agent is active and has
	// fewer than MaxRunning running runs: one conditional UPDATE. 409
	// run_not_live when it is no longer queued; 409 precondition_failed
	// (details.reason no_free_slot or agent_not_active) otherwise. Activity run.started.
	RunStart(ctx context.Context, p *RunStartParams) (*clasp.Run, error)
	// RunSetProcess records the pid and process start time (clock ticks
	// since boot, /proc/<pid>/stat field 22) of a running run of HostID.
	RunSetProcess(ctx context.Context, runID, hostID string, pid int, procStart int64) error
	// RunRenew renews the lease of a running run of HostID (a sign of life
	// the server gives while the process lives). 409 run_not_live.
	RunRenew(ctx context.Context, runID, hostID string, ttl time.Duration) error
	// RunRunningOnHost lists the running server-managed runs of hostID.
	RunRunningOnHost(ctx context.Context, hostID string) ([]*ManagedRun, error)
	// RunProcessLost: a running server-managed run of HostID whose process
	// is gone becomes failed (process_lost). If it is attempt 1 and has no
	// retry yet, one retry run is queued (retryOfRunId, attempt 2) whose
	// issueId is the issue whose execution lock the lost run holds (its own
	// issue if it still holds that lock, else the one it locked last;
	// holding none: its own issue) and, in the same statement, that issue's
	// execution lock moves to the retry while the lost run's checkout lock
	// is cleared (RULES.md, Process-loss retry); other locks naming it are released (L6) and
	// deferred wakes promoted. Returns the failed run and the retry (nil if
	// none). 409 run_not_live when the run is not running on HostID.
	RunProcessLost(ctx context.Context, p *RunProcessLostParams) (failed, retry *clasp.Run, err error)
	// AgentCancelQueuedRuns cancels the queued runs of an agent (pausing
	// it), releasing their locks (L6) and promoting deferred wakes. Returns
	// how many.
	AgentCancelQueuedRuns(ctx context.Context, agentID string, actor Actor) (int, error)

	// InstanceRegister records server instance in (its ID, Host, PID and
	// ProcStart) with a lease of ttl from now, replacing a row of the same
	// id. The instance's id is the host id its runs carry (RunStart).
	InstanceRegister(ctx context.Context, in *Instance, ttl time.Duration) error
	// InstanceRenew extends the lease of instance id to ttl from now. 404
	// not_found when the row is gone (another instance took it over).
	InstanceRenew(ctx context.Context, id string, ttl time.Duration) error
	// InstanceRelease ends the lease of instance id now (a clean stop: a
	// server on the same host takes its processes over at once). A missing
	// row is no error.
	InstanceRelease(ctx context.Context, id string) error
	// InstanceList lists the instances registered on host, with the
	// lease's state as of the database clock (Instance.Expired).
	InstanceList(ctx context.Context, host string) ([]*Instance, error)
	// InstanceTakeOver takes over instance dead for instance by, if its
	// row still has the lease end in.LeaseExpiresAt as read (one
	// conditional DELETE: of two instances taking over the same one,
	// exactly one does; an instance that renewed meanwhile is not taken).
	// In the same transaction every running managed run of dead moves to
	// by (host_id). It returns the runs of dead whose process is recorded
	// (pid set): the running ones, now of by, to re-adopt or judge lost,
	// and the ended ones, whose process must not outlive them. ok is false
	// (nothing changed) when the row is gone or was renewed.
	InstanceTakeOver(ctx context.Context, dead *Instance, by string) (runs []*ManagedRun, ok bool, err error)
}

// Instance is a server process that runs managed agents' processes
// (heartbeat.Scheduler): its id is the host id of the runs it started or
// took over.
type Instance struct {
	ID             string
	Host           string // the machine: host name and boot id
	PID            int    // the server's own process
	ProcStart      int64  // its start time in clock ticks since boot (/proc/<pid>/stat field 22)
	StartedAt      time.Time
	LeaseExpiresAt time.Time
	Expired        bool // the lease had ended when InstanceList read it (database clock)
}

// AgentAdapterSetParams sets (or, Config nil, removes) an agent's adapter.
type AgentAdapterSetParams struct {
	AgentID string
	Config  *clasp.AdapterConfig
	Actor   Actor
}

// AgentAdapter is an agent with its adapter config.
type AgentAdapter struct {
	Agent  *clasp.Agent
	Config *clasp.AdapterConfig
}

// Wake outcomes.
const (
	WakeQueued    = "queued"    // a new queued run; with an issue it holds the execution lock
	WakeCoalesced = "coalesced" // the agent already had a queued run for the issue (or for no issue)
	WakeDeferred  = "deferred"  // another run holds the issue's execution lock; promoted when it ends
	WakeSkipped   = "skipped"   // the agent is paused or has no enabled adapter; or, promoted, it may no longer check the issue out
)

// WakeParams asks to wake AgentID. Reason is timer, assignment, on_demand.
// IssueID (UUID or identifier, optional) is the issue to work. One
// conditional statement decides, in this order: a wake with the same
// IdempotencyKey for this agent answers the first wake again (Replayed,
// nothing new); an issue the agent may not check out is refused with
// nothing written (WakeIssueRefusal: 409 checkout_conflict when it is
// another agent's, 422 precondition_failed when done or cancelled), whoever
// asks, the board included; a paused agent or one without an adapter: skipped; a queued
// run of the agent for the same issue (or, without issue, any queued run of
// the agent): coalesced; an issue whose execution lock names a live run:
// deferred until that run ends; otherwise a queued run, which takes the
// issue's execution lock (clearing a dead checkout lock in the same write).
type WakeParams struct {
	AgentID        string
	Reason         string
	IssueID        string
	IdempotencyKey string
	Actor          Actor
}

// WakeResult is what a wake did.
type WakeResult struct {
	WakeID         string     `json:"wakeId"`
	Outcome        string     `json:"outcome"`
	Run            *clasp.Run `json:"run"` // the queued or coalesced run; nil when deferred or skipped
	BlockedByRunID *string    `json:"blockedByRunId"`
	Replayed       bool       `json:"replayed"`
}

// ManagedRun is a server-managed run with what the scheduler keeps about it.
type ManagedRun struct {
	Run        *clasp.Run
	ProcStart  int64  // process start time in clock ticks since boot; 0 unknown
	WakeReason string // the invocation source
}

// RunStartParams starts a queued run (RunStart).
type RunStartParams struct {
	RunID      string
	HostID     string
	TokenHash  string
	LeaseTTL   time.Duration
	MaxRunning int
}

// RunProcessLostParams fails a run whose process is gone (RunProcessLost).
type RunProcessLostParams struct {
	RunID  string
	HostID string
	Error  string
}

// WakeRequestHash is the hash a wake request keeps with its idempotency
// key: hex SHA-256 of the reason and the issue's id (resolved from the
// UUID or identifier given; "" for none). A wake whose key was used before
// with another hash is refused with 422 idempotency_key_reused (both
// stores).
func WakeRequestHash(reason, issueID string) string {
	h := sha256.Sum256([]byte(reason + "\x00" + issueID))
	return hex.EncodeToString(h[:])
}

// ErrWakeKeyReused is the error of a wake whose idempotency key was used
// before by a different request of the same agent.
func ErrWakeKeyReused(key string) error {
	e := clasp.Errorf(clasp.CodeIdempotencyKeyReused,
		"Idempotency key was already used by a different wake request of this agent (another reason or issue); use a new key.")
	e.Details = map[string]any{"idempotencyKey": key}
	return e
}

// WakeIssueRefusal says whether agentID may be woken for an issue with the
// given status and assignee (nil: unassigned): only for an issue it may
// check out (rule L1: its own or unassigned) that is not done or
// cancelled, since the wake's run takes the issue's execution lock. It
// returns nil when the wake may go on; otherwise 422 precondition_failed
// (details.reason issue_closed) for a done or cancelled issue, or 409
// checkout_conflict (details.reason assigned_to_other_agent) for another
// agent's issue, the details naming the issue, its status, assignee and
// lock holders (checkoutRunID and executionRunID, nil when free). Both
// stores call it inside the wake's transaction, after locking the issue
// row, and their lock-taking statement repeats the condition.
func WakeIssueRefusal(agentID, issueID string, status clasp.IssueStatus, assignee, checkoutRunID, executionRunID *string) error {
	if status == clasp.IssueDone || status == clasp.IssueCancelled {
		e := clasp.Errorf(clasp.CodePreconditionFailed,
			"Issue %s is %s: an agent cannot be woken to work a closed issue; reopen it first.", issueID, status)
		e.Details = map[string]any{"issueId": issueID, "status": status, "assigneeAgentId": assignee, "reason": WakeReasonIssueClosed}
		return e
	}
	if assignee != nil && *assignee != agentID {
		e := clasp.Errorf(clasp.CodeCheckoutConflict,
			"Issue %s is assigned to agent %s: agent %s cannot be woken to work it (only its assignee, or any agent while it is unassigned).",
			issueID, *assignee, agentID)
		e.Details = map[string]any{"issueId": issueID, "status": status, "assigneeAgentId": assignee,
			"checkoutRunId": checkoutRunID, "executionRunId": executionRunID, "reason": clasp.ReasonAssignedToOtherAgent}
		return e
	}
	return nil
}

// WakeReasonIssueClosed is details.reason of a wake refused because its
// issue is done or cancelled (WakeIssueRefusal).
const WakeReasonIssueClosed = "issue_closed"

// WakeReasonIssueEscalated is details.reason of a wake refused because its
// issue was escalated to a person (RULES.md E3).
const WakeReasonIssueEscalated = "issue_escalated"

// Validate checks a wake before any store runs it (both stores call it):
// 400 invalid_request naming the field for a reason other than timer,
// assignment or on_demand, or an idempotency key over 255 characters.
func (p *WakeParams) Validate() error {
	switch p.Reason {
	case clasp.InvocationTimer, clasp.InvocationAssignment, clasp.InvocationOnDemand:
	default:
		return clasp.InvalidField("reason", "reason must be timer, assignment or on_demand.")
	}
	if len(p.IdempotencyKey) > 255 {
		return clasp.InvalidField("idempotencyKey", "idempotencyKey is at most 255 characters.")
	}
	return nil
}

// CheckTakeOver validates InstanceTakeOver's arguments: 400
// invalid_request (details.field instance) when an instance would take
// itself over.
func CheckTakeOver(dead *Instance, by string) error {
	if dead.ID == by {
		return clasp.InvalidField("instance", "An instance cannot take itself over.")
	}
	return nil
}
