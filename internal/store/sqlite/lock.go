package sqlite

// The lock rules L1-L7 and the sweeper's passes (RULES.md): each rule is
// ONE conditional UPDATE of sql/lock.sql whose WHERE clause is the
// decision, followed in the same write transaction by the rule's activity
// statement (an INSERT ... SELECT that writes its rows from the issue as
// written and the lock state before, passed as arguments: logRule). When
// a rule's fast path matches nothing, LockRead reads the issue's lock
// state for those arguments and, when the unrestricted UPDATE matches
// nothing too, internal/store/lockrules.go explains the refusal from it;
// nothing here decides whether to write, nor which activity rows.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// lockQuery names what LockRead asks besides the issue: the caller's run
// and agent, and the new assignee of a PATCH (setAssignee, assignee).
type lockQuery struct {
	run, agent  string
	setAssignee bool
	assignee    any
}

// lockRead reads the lock state of issue ref (UUID or identifier) visible
// in company ("" for any), statement LockRead; 404 not_found if there is
// none.
func (t *wtx) lockRead(ctx context.Context, ref, company string, lq lockQuery) (*store.LockState, error) {
	return scanLockState(t.queryRow(ctx, "LockRead", lockReadArgs(ref, company, lq, t.now)...), ref)
}

// lockReadArgs are LockRead's arguments for issue ref in company, at now
// (unix µs).
func lockReadArgs(ref, company string, lq lockQuery, now int64) []any {
	rid, rident := store.SplitRef(ref)
	return []any{sql.Named("rid", rid), sql.Named("rident", rident), sql.Named("company", company),
		sql.Named("run", lq.run), sql.Named("agent", lq.agent), sql.Named("set_assignee", lq.setAssignee),
		sql.Named("assignee", lq.assignee), sql.Named("now", now)}
}

// scanLockState reads LockRead's row for issue ref; 404 not_found when
// there is none.
func scanLockState(row *sql.Row, ref string) (*store.LockState, error) {
	var l store.LockState
	err := row.Scan(&l.IssueID, &l.CompanyID, &l.Status, &l.Assignee, &l.Checkout, &l.Execution, &l.CheckoutState, &l.ExecutionState,
		&l.CallerAgent, &l.CallerCompany, &l.CallerState, &l.OwnedByCaller, &l.AgentActive, &l.AssigneeInCompany, &l.UnresolvedBlockers,
		&l.Escalated)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("issue", ref)
	}
	if err != nil {
		return nil, fmt.Errorf("read issue %s: %w", ref, err)
	}
	return &l, nil
}

// heldByCaller is the lock state a fast path assumes: both locks are run's.
func heldByCaller(run string) *store.LockState {
	return &store.LockState{Checkout: &run, Execution: &run}
}

// expectedArg renders expected statuses as ",s1,s2," for instr(:expected, ...).
func expectedArg(expected []string) string { return "," + strings.Join(expected, ",") + "," }

// IssueCheckout is one try of rules L1-L3 for agent r.AgentID's run
// r.Actor.RunID on issue r.Ref (store.Driver), in one write
// transaction: statement Checkout restricted to an unlocked issue (the
// fast path: its old lock columns are known empty), else LockRead and
// Checkout unrestricted; when it wrote, its activity rows (statement
// CheckoutActivity). The transaction holds the write lock from its
// first statement, so a try never loses the row: OK is Changed. A refusal
// answers the lock state LockRead read and the issue as it stands.
func (d *Driver) IssueCheckout(ctx context.Context, r *store.LockRequest) (*store.LockAnswer, error) {
	var ans *store.LockAnswer
	err := d.write(ctx, func(t *wtx) error {
		var err error
		ans, err = t.checkout(ctx, r)
		return err
	})
	return ans, err
}

// checkout is IssueCheckout's try in write transaction t.
func (t *wtx) checkout(ctx context.Context, r *store.LockRequest) (*store.LockAnswer, error) {
	a := r.Actor
	args := store.LockArgs(r.Ref, a)
	args["agent"], args["expected"] = r.AgentID, expectedArg(r.Expected)
	ans, err := t.lockTry(ctx, lockStep{name: "Checkout", what: "check out issue", ref: r.Ref, args: args,
		fast: "unlocked_only", tryFast: true, assumed: &store.LockState{}, lq: lockQuery{run: a.RunID, agent: r.AgentID}})
	if err != nil || !ans.Changed {
		return ans, err
	}
	return ans, t.checkoutActivity(ctx, a, r.AgentID, ans.Issue.ID, &ans.LockState)
}

// checkoutActivity writes, with statement CheckoutActivity, the rows of a
// checkout by agentID's run a.RunID that has just written issue id, whose
// lock state was old (L1-L3: the adoption row when it displaced a dead
// holder, then issue.checked_out).
func (t *wtx) checkoutActivity(ctx context.Context, a store.Actor, agentID, id string, old *store.LockState) error {
	return t.logRule(ctx, "CheckoutActivity", a, oldLockArgs(store.Args{"run": a.RunID, "agent": agentID}, id, old))
}

// lockStep is a lock rule statement as lockTry runs it: its name (what
// names it in errors), its arguments for issue ref (store.LockArgs and
// the rule's own), its fast-path flag (fast: the name of the argument
// that restricts it to the case whose old lock columns are known without
// a read; tryFast: whether that case can apply; assumed: the lock state
// it implies), and what LockRead asks.
type lockStep struct {
	name, what, ref string
	args            store.Args
	fast            string
	tryFast         bool
	assumed         *store.LockState
	lq              lockQuery
}

// lockTry runs, in write transaction t, lock rule statement st restricted
// by its fast-path flag (when tryFast), and, when that matches nothing,
// LockRead and the statement unrestricted on the issue it found. It
// answers, as every dialect's try does (store.LockAnswer): whether it
// wrote (OK is Changed: the transaction holds the write lock from its
// first statement, so a try never loses the row), the issue written or,
// refused, as it stands (statement IssueByID), and the lock state before
// it (the fast path's assumed state, or LockRead's). 404 not_found from
// LockRead; another failure names st.what.
func (t *wtx) lockTry(ctx context.Context, st lockStep) (*store.LockAnswer, error) {
	ans := &store.LockAnswer{}
	var iss *clasp.Issue
	err := sql.ErrNoRows
	if st.tryFast {
		st.args[st.fast], ans.LockState = true, *st.assumed
		iss, err = store.ScanIssue(writer{t}.QueryRow(ctx, st.name, st.args))
	}
	if errors.Is(err, sql.ErrNoRows) {
		var old *store.LockState
		if old, err = t.lockRead(ctx, st.ref, st.args["company"].(string), st.lq); err != nil {
			return nil, err
		}
		ans.LockState = *old
		st.args["rid"], st.args["rident"], st.args["company"], st.args[st.fast] = old.IssueID, "", "", false
		iss, err = store.ScanIssue(writer{t}.QueryRow(ctx, st.name, st.args))
		if errors.Is(err, sql.ErrNoRows) { // refused: the answer is the row as it stands
			ans.Issue, err = t.issueByID(ctx, old.IssueID)
			return ans, err
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", st.what, st.ref, err)
	}
	ans.Changed, ans.OK, ans.Issue = true, true, iss
	ans.IssueID, ans.CompanyID = iss.ID, iss.CompanyID
	return ans, nil
}

// IssueBoardCheckout is one try of S12 (store.Driver): LockRead, then
// statement BoardCheckout on the issue it found and, when it wrote, its
// issue.updated row (statement BoardCheckoutActivity), in one write
// transaction.
func (d *Driver) IssueBoardCheckout(ctx context.Context, r *store.LockRequest) (*store.LockAnswer, error) {
	ans := &store.LockAnswer{}
	err := d.write(ctx, func(t *wtx) error {
		old, err := t.lockRead(ctx, r.Ref, "", lockQuery{agent: r.AgentID})
		if err != nil {
			return err
		}
		*ans = store.LockAnswer{LockState: *old}
		iss, err := store.ScanIssue(t.queryRow(ctx, "BoardCheckout", sql.Named("id", old.IssueID), sql.Named("agent", r.AgentID),
			sql.Named("expected", expectedArg(r.Expected)), sql.Named("now", t.now)))
		if errors.Is(err, sql.ErrNoRows) { // refused, or already so: the answer is the row as it stands
			ans.Issue, err = t.issueByID(ctx, old.IssueID)
			return err
		}
		if err != nil {
			return fmt.Errorf("board checkout of issue %s: %w", old.IssueID, err)
		}
		ans.Changed, ans.OK, ans.Issue = true, true, iss
		return t.logRule(ctx, "BoardCheckoutActivity", r.Actor, oldLockArgs(store.Args{}, iss.ID, old))
	})
	return ans, err
}

// IssueRelease is one try of rule L4 (store.Driver), in one write
// transaction: statement Release restricted to the caller's run holding
// both locks (the fast path: the old lock columns are that run), else
// LockRead and Release unrestricted; when it wrote, its activity row
// (statement ReleaseActivity).
func (d *Driver) IssueRelease(ctx context.Context, r *store.LockRequest) (*store.LockAnswer, error) {
	a := r.Actor
	var ans *store.LockAnswer
	err := d.write(ctx, func(t *wtx) error {
		args := store.LockArgs(r.Ref, a)
		args["unassign"] = r.Unassign
		var err error
		ans, err = t.lockTry(ctx, lockStep{name: "Release", what: "release issue", ref: r.Ref, args: args,
			fast: "held_only", tryFast: a.RunID != "", assumed: heldByCaller(a.RunID), lq: lockQuery{run: a.RunID, agent: a.AgentID}})
		if err != nil || !ans.Changed {
			return err
		}
		return t.logRule(ctx, "ReleaseActivity", a, oldLockArgs(store.Args{"unassign": r.Unassign}, ans.Issue.ID, &ans.LockState))
	})
	return ans, err
}

// IssueForceRelease is the board's force-release (store.Driver):
// LockRead, statement ForceRelease and its issue.admin_force_release row
// (statement ForceReleaseActivity), in one write transaction.
func (d *Driver) IssueForceRelease(ctx context.Context, r *store.LockRequest) (*store.LockAnswer, error) {
	ans := &store.LockAnswer{}
	err := d.write(ctx, func(t *wtx) error {
		old, err := t.lockRead(ctx, r.Ref, "", lockQuery{})
		if err != nil {
			return err
		}
		iss, err := store.ScanIssue(t.queryRow(ctx, "ForceRelease", sql.Named("id", old.IssueID),
			sql.Named("clear_assignee", r.ClearAssignee), sql.Named("now", t.now)))
		if err != nil {
			return fmt.Errorf("force-release issue %s: %w", old.IssueID, err)
		}
		*ans = store.LockAnswer{Changed: true, OK: true, Issue: iss, LockState: *old}
		return t.logRule(ctx, "ForceReleaseActivity", r.Actor,
			oldLockArgs(store.Args{"reason": r.Reason, "clear_assignee": r.ClearAssignee}, iss.ID, old))
	})
	return ans, err
}

// IssuePatch is one try of rules L5 and L6 for PATCH p
// (store.Driver) in the write transaction of q, the write Querier of
// Write: statement IssueAudit reads the fields as they were (for
// issue.updated {changes}), then statement Patch restricted to the
// caller's run holding both locks (the fast path), else LockRead and
// Patch unrestricted (lockTry); when it wrote, its activity rows
// (statement PatchActivity) and the comment. The transaction holds the
// write lock, so a try never loses the row.
func (*Driver) IssuePatch(ctx context.Context, q store.Querier, p *store.IssueUpdateParams) (*store.LockAnswer, error) {
	t, a := q.(writer).t, p.Actor
	args := store.PatchArgs(store.LockArgs(p.Ref, a), p)
	before, err := t.auditArgs(ctx, p.Ref, store.Scope(a))
	if err != nil {
		return nil, err
	}
	ans, err := t.lockTry(ctx, lockStep{name: "Patch", what: "update issue", ref: p.Ref, args: args,
		fast: "held_only", tryFast: a.Type == clasp.ActorAgent && a.RunID != "", assumed: heldByCaller(a.RunID),
		lq: lockQuery{run: a.RunID, agent: a.AgentID, setAssignee: p.AssigneeAgentID != nil, assignee: args["assignee"]}})
	if err != nil || !ans.Changed {
		return ans, err
	}
	act := oldLockArgs(store.Args{"run": a.RunID, "agent": a.AgentID, "set_assignee": args["set_assignee"], "assignee": args["assignee"]},
		ans.Issue.ID, &ans.LockState)
	maps.Copy(act, before) // the status and assignee before are IssueAudit's: the fast path does not read them
	if err := t.logRule(ctx, "PatchActivity", a, act); err != nil {
		return nil, err
	}
	if p.Comment != nil {
		if _, err := t.commentInsert(ctx, ans.Issue.ID, ans.Issue.CompanyID, *p.Comment, a); err != nil {
			return nil, err
		}
	}
	return ans, nil
}

// auditArgs reads the audited fields of issue ref (scoped to company when
// not empty) inside the write transaction (statement IssueAudit) and
// answers them as PatchActivity's arguments old_title, old_description,
// old_status, old_priority and old_assignee; a missing issue gives empty
// ones (the statement that follows answers not_found).
func (t *wtx) auditArgs(ctx context.Context, ref, company string) (store.Args, error) {
	rid, rident := store.SplitRef(ref)
	var title, description, status, priority string
	var assignee *string
	err := t.queryRow(ctx, "IssueAudit", sql.Named("rid", rid), sql.Named("rident", rident), sql.Named("company", company)).
		Scan(&title, &description, &status, &priority, &assignee)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("read issue %s for audit: %w", ref, err)
	}
	return store.Args{"old_title": title, "old_description": description, "old_status": status, "old_priority": priority,
		"old_assignee": store.OrNil(assignee)}, nil
}
