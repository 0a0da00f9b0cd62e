package store

// The dependency wakes (RULES.md, D8), written once for both dialects on
// WakeTx: level-triggered, exactly once per ready state. A ready state of
// issue I is due while I's blockers are all done and
// ready_woken_generation < ready_generation (the generation grows each
// time I's count of unresolved blockers leaves 0); a children state of
// parent P is due while P's children are all closed and
// children_woken_generation < children_generation. Delivery reads the due
// candidates on a reader, then per candidate runs one write transaction:
// the assignee agent's lock first (the order of every wake: agent, then
// issue row), then the compare-and-set that marks the generation woken
// (DepReadyMark, DepChildrenMark), and, when it matched, the activity row
// and the wake through the shared wake path. Of any number of deliveries
// on any number of replicas, exactly one matches each due generation.

import (
	"context"
	"errors"
	"fmt"

	"github.com/clasp-dev/clasp"
)

// DepWakeMark is what a dependency wake's compare-and-set matched: the
// issue's company, identifier, status and the generation it marked woken.
type DepWakeMark struct {
	CompanyID, Identifier string
	Status                clasp.IssueStatus
	Generation            int
}

// ReadyWakeMark runs statement DepReadyMark (WakeTx.ReadyWakeMark).
func (t queryTx) ReadyWakeMark(ctx context.Context, issueID string, assignee *string) (*DepWakeMark, error) {
	return t.depMark(ctx, "DepReadyMark", issueID, assignee)
}

// ChildrenWakeMark runs statement DepChildrenMark (WakeTx.ChildrenWakeMark).
func (t queryTx) ChildrenWakeMark(ctx context.Context, issueID string, assignee *string) (*DepWakeMark, error) {
	return t.depMark(ctx, "DepChildrenMark", issueID, assignee)
}

// depMark runs the named mark statement; nil when it matched nothing.
func (t queryTx) depMark(ctx context.Context, name, issueID string, assignee *string) (*DepWakeMark, error) {
	var m DepWakeMark
	var a any
	if assignee != nil {
		a = *assignee
	}
	err := t.QueryRow(ctx, name, Args{"id": issueID, "assignee": a}).Scan(&m.CompanyID, &m.Identifier, &m.Status, &m.Generation)
	return orNone(t.Driver, &m, err)
}

// depCandidate is a due dependency wake as the reader found it.
type depCandidate struct {
	issueID  string
	assignee *string
	children bool
}

// DependencyWakesDeliver sends the due dependency wakes (D8), at most
// limit candidates of each kind (ready, children) a call, and returns how
// many wakes it sent (a wake request recorded for the assignee agent,
// whatever its outcome). The state of an issue without an assignee is
// marked woken with its activity row and no wake; a ready state of an
// issue closed before the delivery gets its activity row and a wake
// request recorded as skipped (no run); a children state of a closed or
// blocked parent is marked woken with no wake and no activity. Each candidate is its own transaction (see the file's
// comment): a failure of one is returned after the others ran.
func (h Heartbeat) DependencyWakesDeliver(ctx context.Context, limit int) (int, error) {
	limit = PageLimit(limit)
	var cands []depCandidate
	for _, k := range []struct {
		name     string
		children bool
	}{{"DepReadyDue", false}, {"DepChildrenDue", true}} {
		rows, err := h.d.Read().Query(ctx, k.name, Args{"limit": limit})
		if err != nil {
			return 0, h.d.Translate(fmt.Errorf("find due dependency wakes: %w", err))
		}
		err = eachRow(rows, func(sc Row) error {
			c := depCandidate{children: k.children}
			if err := sc.Scan(&c.issueID, &c.assignee); err != nil {
				return err
			}
			cands = append(cands, c)
			return nil
		})
		if err != nil {
			return 0, h.d.Translate(fmt.Errorf("find due dependency wakes: %w", err))
		}
	}
	sent := 0
	var errs []error
	for _, c := range cands {
		ok, err := h.depWake(ctx, c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			sent++
		}
	}
	return sent, errors.Join(errs...)
}

// depWake delivers candidate c in one transaction: true when it sent the
// wake.
func (h Heartbeat) depWake(ctx context.Context, c depCandidate) (bool, error) {
	sent := false
	err := h.TxRunner(ctx, func(tx HeartbeatTx) error {
		sent = false
		if c.assignee != nil {
			if err := tx.LockAgent(ctx, *c.assignee); err != nil {
				return fmt.Errorf("lock agent %s: %w", *c.assignee, err)
			}
		}
		mark, action, reason, genKey := tx.ReadyWakeMark, clasp.ActionIssueBlockersResolved, clasp.InvocationBlockersResolved, "readyGeneration"
		if c.children {
			mark, action, reason, genKey = tx.ChildrenWakeMark, clasp.ActionIssueChildrenCompleted, clasp.InvocationChildrenComplete, "childrenGeneration"
		}
		m, err := mark(ctx, c.issueID, c.assignee)
		if err != nil {
			return fmt.Errorf("mark dependency wake of issue %s: %w", c.issueID, err)
		}
		if m == nil {
			return nil // claimed elsewhere, or no longer due
		}
		closed := m.Status.Closed()
		if (c.children && (closed || m.Status == clasp.IssueBlocked)) || (closed && c.assignee == nil) {
			return nil // nothing to wake: marked woken only
		}
		if err := tx.LogActivity(ctx, m.CompanyID, SystemActor, action, "issue", c.issueID, map[string]any{
			"identifier": m.Identifier, genKey: m.Generation,
		}); err != nil {
			return err
		}
		if c.assignee == nil {
			return nil
		}
		sent = true
		if closed {
			// The issue was closed between its ready state and this
			// delivery (its agent took it at once): the wake is recorded,
			// skipped, so that every ready state has its one wake request.
			return recordSkippedWake(ctx, tx, m.CompanyID, *c.assignee, c.issueID, reason)
		}
		_, err = wake(ctx, tx, &WakeParams{AgentID: *c.assignee, IssueID: c.issueID, Reason: reason, Actor: SystemActor})
		if clasp.AsError(err) != nil {
			// the wake path refuses it (its agent is gone, say): the state
			// stays woken and no wake request is recorded
			sent = false
			return nil
		}
		return err
	})
	if err != nil {
		return false, h.d.Translate(fmt.Errorf("deliver dependency wake of issue %s: %w", c.issueID, err))
	}
	return sent, nil
}

// recordSkippedWake records a wake request of agentID for issueID with
// reason and outcome skipped, and its agent.wake_requested row (actor
// system), starting nothing: the wake of a ready state whose issue is
// closed already.
func recordSkippedWake(ctx context.Context, tx WakeTx, companyID, agentID, issueID, reason string) error {
	id := tx.NewID()
	if err := tx.InsertWake(ctx, &WakeRecord{ID: id, CompanyID: companyID, AgentID: agentID, IssueID: issueID,
		Reason: reason, Outcome: WakeSkipped}); err != nil {
		return fmt.Errorf("record wake of agent %s: %w", agentID, err)
	}
	return tx.LogActivity(ctx, companyID, SystemActor, clasp.ActionWakeRequested, "agent", agentID, map[string]any{
		"wakeId": id, "reason": reason, "issueId": issueID, "outcome": WakeSkipped, "runId": nil, "blockedByRunId": nil,
	})
}
