package sqlite

// Server-managed agents on SQLite: store.HeartbeatTx on the store's write
// transaction, which holds SQLite's write lock from its first statement
// (so LockAgent has nothing to do). The statements both dialects share and
// the algorithms are the store package's; what is here is the part of a
// heartbeat transaction that SQLite does differently (store.TxDriver).

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// noRow is (nil, nil) for sql.ErrNoRows, else (v, err).
func noRow[T any](v *T, err error) (*T, error) {
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return v, err
}

// hbtx is SQLite's part of a heartbeat transaction (store.TxDriver), on
// one write transaction.
type hbtx struct{ writer }

// newHBTx is write transaction t as a store.HeartbeatTx.
func newHBTx(t *wtx) store.HeartbeatTx { return store.NewHeartbeatTx(writer{t}, t.s, hbtx{writer{t}}) }

// HeartbeatWrite runs fn in one write transaction (Driver.write).
func (s *Driver) HeartbeatWrite(ctx context.Context, fn func(store.Querier, store.TxDriver) error) error {
	return s.write(ctx, func(tx *wtx) error { return fn(writer{tx}, hbtx{writer{tx}}) })
}

func (h hbtx) LogActivity(ctx context.Context, companyID string, actor store.Actor, action, entityType, entityID string, details any) error {
	return h.t.logActivity(ctx, companyID, actor, action, entityType, entityID, details)
}

func (hbtx) LockAgent(context.Context, string) error { return nil } // the write lock is held

// IssueID resolves ref with statement IssueRef.
func (h hbtx) IssueID(ctx context.Context, companyID, ref string) (string, error) {
	var id string
	rid, rident := store.SplitRef(ref)
	err := h.QueryRow(ctx, qIssueRef, store.Args{"rid": rid, "rident": rident, "company": companyID}).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return id, err
}

// ProcessLost is the process-loss rule in four statements of the write
// transaction (SQLite has no writing CTEs): the run fails (RunProcessLost);
// attempt 1 without a retry gets one, for the issue whose execution lock it
// holds (RunHeldIssue) or its own, inserted first (unique retry_of_run_id:
// at most one); then that lock moves to the retry (RunMoveExecution).
func (h hbtx) ProcessLost(ctx context.Context, p *store.RunProcessLostParams, msg, retryID string) (*store.ProcessLoss, error) {
	var loss store.ProcessLoss
	run, err := noRow(store.ScanRun(h.QueryRow(ctx, "RunProcessLost", store.Args{"run": p.RunID, "host": p.HostID, "error": msg})))
	if err != nil || run == nil {
		return &loss, err
	}
	loss.Failed = run
	if run.Attempt != 1 || run.RetryOfRunID != nil {
		return &loss, nil
	}
	var held *string
	if err := h.QueryRow(ctx, "RunHeldIssue", store.Args{"lost": run.ID, "issue": run.IssueID}).
		Scan(&held); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("find the issue of run %s: %w", run.ID, err)
	}
	issue := run.IssueID
	if held != nil {
		issue = held
	}
	loss.Retry, err = newHBTx(h.t).InsertQueuedRun(ctx, &store.QueuedRun{ID: retryID, CompanyID: run.CompanyID, AgentID: run.AgentID,
		Reason: clasp.InvocationRetry, IssueID: deref(issue), RetryOfRunID: run.ID, Attempt: 2})
	if err != nil || loss.Retry == nil || held == nil {
		return &loss, err
	}
	rows, err := h.Query(ctx, "RunMoveExecution", store.Args{"retry": retryID, "lost": run.ID, "issue": *held})
	if err != nil {
		return nil, fmt.Errorf("move locks of run %s: %w", run.ID, err)
	}
	moved, err := store.ScanAll(rows, func(sc store.Row) (*store.IssueInCompany, error) {
		var m store.IssueInCompany
		return &m, sc.Scan(&m.ID, &m.CompanyID)
	})
	for _, m := range moved {
		loss.Moved = append(loss.Moved, *m)
	}
	return &loss, err
}

// ReleaseRunLocks is store.TxDriver.ReleaseRunLocks: for each run, in id
// order, statement ReleaseRunLocks, its issue.lock_released rows and,
// when finished, its run.finished row.
func (h hbtx) ReleaseRunLocks(ctx context.Context, a store.Actor, status clasp.RunStatus, runs []*clasp.Run, finished bool) error {
	runs = slices.SortedFunc(slices.Values(runs), func(x, y *clasp.Run) int { return strings.Compare(x.ID, y.ID) })
	for _, r := range runs {
		if err := h.t.releaseRunLocks(ctx, r, status, a); err != nil {
			return err
		}
		if finished {
			if err := h.t.runFinished(ctx, r.ID, a); err != nil {
				return err
			}
		}
	}
	return nil
}

// deref is *p, or "" for nil.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
