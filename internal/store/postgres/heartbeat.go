package postgres

// Server-managed agents on PostgreSQL: store.HeartbeatTx on a transaction
// (s.tx, retried whole on a deadlock or serialization failure). The
// statements both dialects share and the algorithms are the store
// package's; what is here is the part of a heartbeat transaction that
// PostgreSQL does differently (store.TxDriver). The wakes of one agent are serialised by a
// transaction advisory lock on the agent (LockAgent: coalescing and
// idempotency keys across replicas), the issue a wake decides on is locked
// FOR UPDATE (statement WakeIssueLocks), and a loss's retry is unique by
// retry_of_run_id.

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// hbtx is PostgreSQL's part of a heartbeat transaction (store.TxDriver),
// on transaction tx.
type hbtx struct {
	pooled // tx's statements
	tx     pgx.Tx
}

// HeartbeatWrite runs fn in one transaction (s.tx: run again whole on a
// deadlock or serialization failure).
func (s *Driver) HeartbeatWrite(ctx context.Context, fn func(store.Querier, store.TxDriver) error) error {
	return s.tx(ctx, func(tx pgx.Tx) error { return fn(pooled{tx}, hbtx{pooled{tx}, tx}) })
}

func (h hbtx) LogActivity(ctx context.Context, companyID string, actor store.Actor, action, entityType, entityID string, details any) error {
	return logActivity(ctx, h.tx, companyID, actor, action, entityType, entityID, details)
}

// LockAgent serialises the heartbeat writes of one agent across replicas
// (statement AgentLock, a transaction advisory lock).
func (h hbtx) LockAgent(ctx context.Context, agentID string) error {
	_, err := h.Exec(ctx, "AgentLock", store.Args{"agent": agentID})
	return wrap(err, "lock agent %s", agentID)
}

// IssueID resolves ref with statement IssueRef.
func (h hbtx) IssueID(ctx context.Context, companyID, ref string) (string, error) {
	var id string
	rid, rident := store.SplitRef(ref)
	err := h.QueryRow(ctx, "IssueRef", store.Args{"rid": rid, "rident": rident, "company": companyID}).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return id, err
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

// ReleaseRunLocks is store.TxDriver.ReleaseRunLocks: statement
// ReleaseRunLocks, one statement for every run.
func (h hbtx) ReleaseRunLocks(ctx context.Context, a store.Actor, status clasp.RunStatus, runs []*clasp.Run, finished bool) error {
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	args := actorArgs(namedArgs{"runs": ids, "status": string(status), "finished": finished}, a)
	var n int64
	return wrap(h.tx.QueryRow(ctx, q("ReleaseRunLocks"), args).Scan(&n), "release locks of runs %v", ids)
}

// UnassignIssues runs statement AgentUnassignIssues, which writes its own
// activity rows (store.HeartbeatTx.UnassignIssues).
func (h hbtx) UnassignIssues(ctx context.Context, agentID string, actor store.Actor) error {
	_, err := h.Exec(ctx, "AgentUnassignIssues", store.ActorArgs(store.Args{"agent": agentID}, actor))
	return store.Wrap(err, "unassign the issues of agent %s", agentID)
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
