package store

// The wake and deferred-wake algorithms, written once for both dialects.
// A dialect supplies WakeTx: one statement a method, run inside the write
// transaction the algorithm runs in (SQLite: the store's write
// transaction, which holds the write lock from its first statement;
// PostgreSQL: a READ COMMITTED transaction in which IssueLocks locks the
// issue row FOR UPDATE and LockAgent takes an advisory lock on the agent).
// Each lock rule stays one conditional statement (TakeExecution); the reads
// next to it only explain a refusal or fill an activity row.

import (
	"context"
	"fmt"

	"github.com/clasp-dev/clasp"
)

// WakeTx is what Wake and PromoteBlockedBy need from a dialect: each
// method runs one statement in the current transaction and returns its
// rows as shared types; unexpected database errors are returned as they
// are (the caller wraps them with context).
type WakeTx interface {
	// NewID returns a fresh UUIDv7 for a run or a wake request.
	NewID() string
	// LogActivity writes one activity row (details marshalled as JSON).
	LogActivity(ctx context.Context, companyID string, actor Actor, action, entityType, entityID string, details any) error
	// LockAgent serialises the heartbeat writes of one agent (PostgreSQL:
	// an advisory transaction lock, across replicas; SQLite: nothing, the
	// write lock is held already).
	LockAgent(ctx context.Context, agentID string) error
	// WakeByKey returns the wake request of agentID recorded with
	// idempotency key key, nil when there is none.
	WakeByKey(ctx context.Context, agentID, key string) (*RecordedWake, error)
	// IssueID resolves ref (UUID or identifier) among the issues of
	// companyID: their id, "" when there is no such issue.
	IssueID(ctx context.Context, companyID, ref string) (string, error)
	// AgentAdapter returns agent agentID with its adapter config (nil when
	// it has none); 404 not_found when the agent is missing.
	AgentAdapter(ctx context.Context, agentID string) (*clasp.Agent, *clasp.AdapterConfig, error)
	// IssueLocks reads issue issueID's status, assignee and lock holders
	// (PostgreSQL: locking the row FOR UPDATE, so that no reassignment or
	// close lands before the wake's lock write).
	IssueLocks(ctx context.Context, issueID string) (*IssueLockState, error)
	// QueuedRunFor returns agentID's oldest queued managed run for issueID
	// ("": for no issue), nil when it has none.
	QueuedRunFor(ctx context.Context, agentID, issueID string) (*clasp.Run, error)
	// TakeExecution runs statement TakeExecution (the run runID, queued for
	// agentID, takes issueID's execution lock when its lock columns are
	// empty or name dead runs, clearing a dead checkout lock in the same
	// write) and reports whether it matched the issue.
	TakeExecution(ctx context.Context, runID, agentID, issueID string) (bool, error)
	// InsertQueuedRun inserts a queued managed run (statement
	// RunInsertQueued); nil when it conflicts (a second retry of one run).
	InsertQueuedRun(ctx context.Context, r *QueuedRun) (*clasp.Run, error)
	// RunGet returns run id; 404 not_found when it is missing.
	RunGet(ctx context.Context, id string) (*clasp.Run, error)
	// InsertWake records a wake request.
	InsertWake(ctx context.Context, w *WakeRecord) error
	// DeferredWakes lists, oldest first, the deferred wakes blocked by
	// any of runIDs (PostgreSQL: locking them FOR UPDATE).
	DeferredWakes(ctx context.Context, runIDs []string) ([]*DeferredWake, error)
	// SetWakeOutcome sets a deferred wake's outcome (statement
	// WakePromote): status, its run and the run blocking it, if it is still
	// deferred.
	SetWakeOutcome(ctx context.Context, wakeID, status string, runID, blockedBy *string) error
	// ReadyWakeMark runs statement DepReadyMark (D8): issue issueID's due
	// ready state, while its assignee is assignee (nil: none), is marked
	// woken; nil when nothing matched (claimed elsewhere, or not due).
	ReadyWakeMark(ctx context.Context, issueID string, assignee *string) (*DepWakeMark, error)
	// ChildrenWakeMark is ReadyWakeMark for a parent's children state
	// (statement DepChildrenMark).
	ChildrenWakeMark(ctx context.Context, issueID string, assignee *string) (*DepWakeMark, error)
}

// RecordedWake is a wake request as recorded (WakeTx.WakeByKey).
type RecordedWake struct {
	ID, Status, CompanyID string
	RunID, BlockedByRunID *string
	RequestHash           *string // nil for rows written before request hashes were kept
}

// IssueLockState is the part of an issue a wake decides on (WakeTx.IssueLocks).
type IssueLockState struct {
	Status                        clasp.IssueStatus
	AssigneeAgentID               *string
	CheckoutRunID, ExecutionRunID *string
	// Escalated: the issue was escalated to a person (RULES.md E3) and
	// has not left blocked since.
	Escalated bool
}

// QueuedRun is a managed run to queue (WakeTx.InsertQueuedRun).
type QueuedRun struct {
	ID, CompanyID, AgentID string
	Reason                 string // invocation source
	IssueID                string // "" for none
	RetryOfRunID           string // "" unless a retry
	Attempt                int
}

// WakeRecord is a wake request to record (WakeTx.InsertWake).
type WakeRecord struct {
	ID, CompanyID, AgentID string
	IssueID                string // "" for none
	Reason, IdempotencyKey string
	Outcome                string
	RunID, BlockedByRunID  *string
	RequestHash            *string // set with an idempotency key
}

// DeferredWake is a deferred wake waiting for run EndedRunID (WakeTx.DeferredWakes).
type DeferredWake struct {
	ID, CompanyID, AgentID string
	IssueID                string // "" for none
	Reason                 string
	EndedRunID             string // the run it waited for
}

// SystemActor is the actor of what the server does by itself (promotions,
// starts, losses).
var SystemActor = Actor{Type: clasp.ActorSystem}

// Optional is s as a nullable value: nil for "".
func Optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func wake(ctx context.Context, tx WakeTx, p *WakeParams) (*WakeResult, error) {
	if err := tx.LockAgent(ctx, p.AgentID); err != nil {
		return nil, fmt.Errorf("lock agent %s: %w", p.AgentID, err)
	}
	if p.IdempotencyKey != "" {
		res, err := wakeReplay(ctx, tx, p)
		if err != nil || res != nil {
			return res, err
		}
	}
	a, cfg, err := tx.AgentAdapter(ctx, p.AgentID)
	if err != nil {
		return nil, err
	}
	if p.Actor.Type == clasp.ActorAgent && p.Actor.CompanyID != a.CompanyID {
		return nil, ErrNotFound("agent", p.AgentID)
	}
	issueID := ""
	var locks *IssueLockState
	if p.IssueID != "" {
		if issueID, err = tx.IssueID(ctx, a.CompanyID, p.IssueID); err != nil {
			return nil, fmt.Errorf("find issue %s: %w", p.IssueID, err)
		}
		if issueID == "" {
			return nil, ErrNotFound("issue", p.IssueID)
		}
		if locks, err = tx.IssueLocks(ctx, issueID); err != nil {
			return nil, fmt.Errorf("read issue %s: %w", issueID, err)
		}
		if err := wakeRefusalOf(a.ID, issueID, locks); err != nil {
			return nil, err
		}
	}
	res := &WakeResult{WakeID: tx.NewID()}
	res.Outcome, res.Run, res.BlockedByRunID, err = wakeDecide(ctx, tx, a, cfg, issueID, p.Reason, locks, p.Actor)
	if err != nil {
		return nil, err
	}
	var runID, hash *string
	if res.Run != nil {
		runID = &res.Run.ID
	}
	if p.IdempotencyKey != "" {
		hash = Optional(WakeRequestHash(p.Reason, issueID))
	}
	if err := tx.InsertWake(ctx, &WakeRecord{ID: res.WakeID, CompanyID: a.CompanyID, AgentID: a.ID, IssueID: issueID,
		Reason: p.Reason, IdempotencyKey: p.IdempotencyKey, Outcome: res.Outcome, RunID: runID,
		BlockedByRunID: res.BlockedByRunID, RequestHash: hash}); err != nil {
		return nil, fmt.Errorf("record wake of agent %s: %w", a.ID, err)
	}
	return res, tx.LogActivity(ctx, a.CompanyID, p.Actor, clasp.ActionWakeRequested, "agent", a.ID, map[string]any{
		"wakeId": res.WakeID, "reason": p.Reason, "issueId": Optional(issueID), "outcome": res.Outcome,
		"runId": runID, "blockedByRunId": res.BlockedByRunID,
	})
}

// wakeReplay answers a wake whose idempotency key agent p.AgentID used
// before: that wake again (Replayed), or ErrWakeKeyReused when the earlier
// request had another reason or issue (the same issue by UUID or
// identifier; a missing issue is another request). nil when the key is new.
func wakeReplay(ctx context.Context, tx WakeTx, p *WakeParams) (*WakeResult, error) {
	w, err := tx.WakeByKey(ctx, p.AgentID, p.IdempotencyKey)
	if err != nil {
		return nil, fmt.Errorf("find wake: %w", err)
	}
	if w == nil {
		return nil, nil
	}
	if w.RequestHash != nil {
		issueID := ""
		if p.IssueID != "" {
			if issueID, err = tx.IssueID(ctx, w.CompanyID, p.IssueID); err != nil {
				return nil, fmt.Errorf("find issue %s: %w", p.IssueID, err)
			}
			if issueID == "" {
				issueID = "missing:" + p.IssueID
			}
		}
		if *w.RequestHash != WakeRequestHash(p.Reason, issueID) {
			return nil, ErrWakeKeyReused(p.IdempotencyKey)
		}
	}
	res := &WakeResult{WakeID: w.ID, Outcome: w.Status, BlockedByRunID: w.BlockedByRunID, Replayed: true}
	if w.RunID != nil {
		if res.Run, err = tx.RunGet(ctx, *w.RunID); err != nil {
			return nil, fmt.Errorf("get run %s: %w", *w.RunID, err)
		}
	}
	return res, nil
}

// wakeRefusalOf is WakeIssueRefusal on the state IssueLocks read.
func wakeRefusalOf(agentID, issueID string, l *IssueLockState) error {
	if l.Escalated {
		e := clasp.Errorf(clasp.CodePreconditionFailed,
			"Issue %s was escalated to a person after its runs kept failing: no wake takes it until someone moves it out of blocked.", issueID)
		e.Details = map[string]any{"issueId": issueID, "status": l.Status, "assigneeAgentId": l.AssigneeAgentID, "reason": WakeReasonIssueEscalated}
		return e
	}
	return WakeIssueRefusal(agentID, issueID, l.Status, l.AssigneeAgentID, l.CheckoutRunID, l.ExecutionRunID)
}

// wakeDecide is the outcome of a wake of agent a (adapter cfg) for issueID
// ("" none) whose issue may be worked (locks: its state as read, nil
// without issue): skipped for an agent not active or without adapter;
// coalesced into its queued run for the issue; else a queued run taking
// the issue's execution lock, or deferred behind the run that holds it.
func wakeDecide(ctx context.Context, tx WakeTx, a *clasp.Agent, cfg *clasp.AdapterConfig, issueID, reason string,
	locks *IssueLockState, actor Actor) (outcome string, run *clasp.Run, blockedBy *string, err error) {
	if a.Status != clasp.AgentActive || cfg == nil {
		return WakeSkipped, nil, nil, nil
	}
	if run, err = tx.QueuedRunFor(ctx, a.ID, issueID); err != nil {
		return "", nil, nil, fmt.Errorf("find queued run of agent %s: %w", a.ID, err)
	}
	if run != nil {
		return WakeCoalesced, run, nil, nil
	}
	if run, blockedBy, err = queueRun(ctx, tx, a, issueID, reason, locks, actor); err != nil {
		return "", nil, nil, err
	}
	if run == nil {
		return WakeDeferred, nil, blockedBy, nil
	}
	return WakeQueued, run, nil, nil
}

// queueRun queues a managed run of agent a for issueID ("" none). With an
// issue, the run's id first takes the issue's execution lock
// (TakeExecution); when that matches nothing no run is queued and
// blockedBy names the run holding the issue as locks read it (the
// execution lock's run, else the checkout lock's). Activity run.queued, and
// issue.execution_locked with the lock holders it replaced.
func queueRun(ctx context.Context, tx WakeTx, a *clasp.Agent, issueID, reason string, locks *IssueLockState, actor Actor) (run *clasp.Run, blockedBy *string, err error) {
	id := tx.NewID()
	if issueID != "" {
		ok, err := tx.TakeExecution(ctx, id, a.ID, issueID)
		if err != nil {
			return nil, nil, fmt.Errorf("take execution lock of issue %s: %w", issueID, err)
		}
		if !ok {
			b := locks.ExecutionRunID
			if b == nil {
				b = locks.CheckoutRunID
			}
			if b == nil {
				return nil, nil, fmt.Errorf("take execution lock of issue %s: refused with no holder", issueID)
			}
			return nil, b, nil
		}
	}
	run, err = tx.InsertQueuedRun(ctx, &QueuedRun{ID: id, CompanyID: a.CompanyID, AgentID: a.ID, Reason: reason,
		IssueID: issueID, Attempt: 1})
	if err != nil {
		return nil, nil, fmt.Errorf("queue run of agent %s: %w", a.ID, err)
	}
	if run == nil {
		return nil, nil, fmt.Errorf("queue run of agent %s: the run's id is taken", a.ID)
	}
	if err := logRunQueued(ctx, tx, run, actor); err != nil {
		return nil, nil, err
	}
	if issueID != "" {
		if err := tx.LogActivity(ctx, a.CompanyID, actor, clasp.ActionIssueExecutionLocked, "issue", issueID, map[string]any{
			"runId": run.ID, "previousCheckoutRunId": locks.CheckoutRunID, "previousExecutionRunId": locks.ExecutionRunID,
		}); err != nil {
			return nil, nil, err
		}
	}
	return run, nil, nil
}

// logRunQueued writes run.queued for run.
func logRunQueued(ctx context.Context, tx interface {
	LogActivity(ctx context.Context, companyID string, actor Actor, action, entityType, entityID string, details any) error
}, run *clasp.Run, actor Actor) error {
	return tx.LogActivity(ctx, run.CompanyID, actor, clasp.ActionRunQueued, "run", run.ID, map[string]any{
		"agentId": run.AgentID, "issueId": run.IssueID, "reason": run.InvocationSource, "retryOfRunId": run.RetryOfRunID,
		"attempt": run.Attempt,
	})
}

// PromoteBlockedBy promotes the deferred wakes that waited for runs
// runIDs, oldest first: the first for an issue whose lock is now free gets
// a queued run holding its execution lock; later ones of the same agent
// coalesce into it; the others wait for the new holder; a wake whose agent
// is paused or has lost its adapter, or whose issue it may no longer work
// (reassigned or closed meanwhile), is skipped. One wake.promoted each
// (actor system) unless it stays deferred. Part of rule L6: it runs in the
// transaction that ended the runs.
func PromoteBlockedBy(ctx context.Context, tx WakeTx, runIDs []string) (promoted int, err error) {
	if len(runIDs) == 0 {
		return 0, nil
	}
	ws, err := tx.DeferredWakes(ctx, runIDs)
	if err != nil {
		return 0, fmt.Errorf("find deferred wakes: %w", err)
	}
	for _, w := range ws {
		if err := tx.LockAgent(ctx, w.AgentID); err != nil {
			return promoted, fmt.Errorf("lock agent %s: %w", w.AgentID, err)
		}
		a, cfg, err := tx.AgentAdapter(ctx, w.AgentID)
		if err != nil {
			return promoted, err
		}
		var locks *IssueLockState
		allowed := true
		if w.IssueID != "" {
			if locks, err = tx.IssueLocks(ctx, w.IssueID); err != nil {
				return promoted, fmt.Errorf("read issue %s: %w", w.IssueID, err)
			}
			allowed = wakeRefusalOf(a.ID, w.IssueID, locks) == nil
		}
		status := WakeSkipped
		var run *clasp.Run
		var blocked *string
		if allowed {
			if status, run, blocked, err = wakeDecide(ctx, tx, a, cfg, w.IssueID, w.Reason, locks, SystemActor); err != nil {
				return promoted, err
			}
		}
		var rid *string
		if run != nil {
			rid = &run.ID
		}
		if err := tx.SetWakeOutcome(ctx, w.ID, status, rid, blocked); err != nil {
			return promoted, fmt.Errorf("promote wake %s: %w", w.ID, err)
		}
		if status != WakeDeferred {
			promoted++
			if err := tx.LogActivity(ctx, w.CompanyID, SystemActor, clasp.ActionWakePromoted, "agent", w.AgentID, map[string]any{
				"wakeId": w.ID, "runId": rid, "issueId": Optional(w.IssueID), "endedRunId": w.EndedRunID, "outcome": status,
			}); err != nil {
				return promoted, err
			}
		}
	}
	return promoted, nil
}
