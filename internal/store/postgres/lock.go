package postgres

// The lock rules L1-L7 and the sweeper's passes (RULES.md): each rule is
// ONE conditional statement of sql/lock.sql, run on its own (its own
// implicit transaction, one round trip), that decides, writes the issue
// with a compare-and-set on the row version, writes its activity rows and
// answers the issue with its lock state before the statement. Refusals are
// explained from that answer by internal/store/lockrules.go; nothing here
// decides whether to write.

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// lockTry runs the named lock rule statement once, on its own (again on
// deadlock, Store.retry), and returns its answer; a 404 not_found naming
// ref when the issue does not exist in scope; what names the rule in
// other errors.
func (s *Driver) lockTry(ctx context.Context, name, what, ref string, args namedArgs) (*store.LockAnswer, error) {
	var l *store.LockAnswer
	err := s.retry(ctx, func() error {
		var err error
		l, err = scanLockAnswer(name, s.pool.QueryRow(ctx, q(name), args))
		return err
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows) || clasp.ErrorCode(err) == clasp.CodeNotFound:
		return nil, notFound("issue", ref)
	case err != nil:
		return nil, wrap(err, "%s %s", what, ref)
	}
	return l, nil
}

// scanLockAnswer reads the answer columns every lock rule statement has
// (sql/lock.sql): changed, the issue, old_status, old_assignee,
// old_checkout, old_execution, checkout_state, execution_state,
// caller_agent, caller_company, caller_state, owned_by_caller,
// agent_active, assignee_in_company, ok, run_ended, escalated. name is the statement's, whose
// scan plans are kept (plannedRow). The answer, its issue and every scan
// destination are one allocation (lockScan).
func scanLockAnswer(name string, row pgx.Row) (*store.LockAnswer, error) {
	ls := &lockScan{}
	l := &ls.l
	dest := append(ls.dest[:0], &l.Changed)
	dest = ls.ir.appendDest(dest, &ls.iss)
	dest = append(dest, &l.Status, &l.Assignee, &l.Checkout, &l.Execution, &l.CheckoutState, &l.ExecutionState,
		&l.CallerAgent, &l.CallerCompany, &l.CallerState, &ls.owned, &ls.active, &ls.assigneeCompany, &l.OK, &l.RunEnded, &l.Escalated)
	ls.row = plannedRow{name: name, dest: dest}
	if err := row.Scan(&ls.row); err != nil {
		return nil, err
	}
	if err := ls.ir.done(); err != nil {
		return nil, err
	}
	l.Issue, l.IssueID, l.CompanyID = &ls.iss, ls.iss.ID, ls.iss.CompanyID
	l.OwnedByCaller = ls.owned.Valid && ls.owned.Bool
	l.AgentActive = ls.active.Valid && ls.active.Bool
	l.AssigneeInCompany = ls.assigneeCompany.Valid && ls.assigneeCompany.Bool
	// D1/D2: the answered issue is the row before the statement when it
	// wrote nothing (and its count is not changed by a lock rule's write)
	l.UnresolvedBlockers = ls.iss.UnresolvedBlockerCount
	return l, nil
}

// lockScan is what scanLockAnswer scans one answer into: the answer, its
// issue, the issue's times, the three nullable flags (NULL is false) and
// the destinations (1 + the 22 issue columns + 15: an array too short for them costs an allocation per answer).
type lockScan struct {
	l                              store.LockAnswer
	iss                            clasp.Issue
	ir                             issueRow
	owned, active, assigneeCompany pgtype.Bool
	dest                           [38]any
	row                            plannedRow
}

// lockArgs are the arguments every lock rule statement takes: the issue
// reference within the actor's scope, the actor's run and agent, and the
// actor columns of its activity rows.
func lockArgs(ref string, a store.Actor) namedArgs {
	return actorArgs(namedArgs(store.LockArgs(ref, a)), a)
}

// pooledLockArgs is lockArgs in a map taken from lockArgsPool, for the
// rules run on every checkout and release; give it back with
// putLockArgs once its statement has run (pgx keeps no reference to it:
// RewriteQuery copies the values out).
func pooledLockArgs(ref string, a store.Actor) namedArgs {
	m, _ := lockArgsPool.Get().(namedArgs)
	if m == nil {
		return lockArgs(ref, a)
	}
	return actorArgs(namedArgs(store.FillLockArgs(store.Args(m), ref, a)), a)
}

// putLockArgs empties args and keeps it for pooledLockArgs.
func putLockArgs(args namedArgs) {
	clear(args)
	lockArgsPool.Put(args)
}

// lockArgsPool holds emptied argument maps of lock rules (their buckets
// stay allocated).
var lockArgsPool sync.Pool

// byRef names the variant of a lock rule statement that finds the issue
// the way args name it (store.LockArgs): byID when the reference is an id
// (@rid), byIdent when it is an identifier (@rident, also for a reference
// that is neither, which finds no issue). Each variant holds only its own
// look-up, so the request still runs one statement, with fewer plan nodes
// than one that resolves both kinds (PostgreSQL builds them anew on every
// execution).
func byRef(args namedArgs, byID, byIdent string) string {
	if rid, _ := args["rid"].(string); rid != "" {
		return byID
	}
	return byIdent
}

// IssueCheckout is one try of rules L1-L3 for an agent's run
// (store.Driver): statement Checkout, or CheckoutByIdentifier as
// byRef picks.
func (d *Driver) IssueCheckout(ctx context.Context, r *store.LockRequest) (*store.LockAnswer, error) {
	args := pooledLockArgs(r.Ref, r.Actor)
	defer putLockArgs(args)
	args["agent"], args["expected"] = r.AgentID, r.Expected
	return d.lockTry(ctx, byRef(args, "Checkout", "CheckoutByIdentifier"), "check out issue", r.Ref, args)
}

// IssueBoardCheckout is one try of S12 (store.Driver): statement
// BoardCheckout.
func (d *Driver) IssueBoardCheckout(ctx context.Context, r *store.LockRequest) (*store.LockAnswer, error) {
	args := pooledLockArgs(r.Ref, r.Actor)
	defer putLockArgs(args)
	args["agent"], args["expected"] = r.AgentID, r.Expected
	return d.lockTry(ctx, "BoardCheckout", "board checkout of issue", r.Ref, args)
}

// IssueRelease is one try of rule L4 (store.Driver): statement
// Release, or ReleaseByIdentifier as byRef picks.
func (d *Driver) IssueRelease(ctx context.Context, r *store.LockRequest) (*store.LockAnswer, error) {
	args := pooledLockArgs(r.Ref, r.Actor)
	defer putLockArgs(args)
	args["unassign"] = r.Unassign
	return d.lockTry(ctx, byRef(args, "Release", "ReleaseByIdentifier"), "release issue", r.Ref, args)
}

// IssueForceRelease is one try of the board's force-release
// (store.Driver): statement ForceRelease.
func (d *Driver) IssueForceRelease(ctx context.Context, r *store.LockRequest) (*store.LockAnswer, error) {
	args := lockArgs(r.Ref, r.Actor)
	args["reason"], args["clear_assignee"] = r.Reason, r.ClearAssignee
	return d.lockTry(ctx, "ForceRelease", "force-release issue", r.Ref, args)
}

// IssuePatch is one try of rules L5 and L6 for PATCH p
// (store.Driver) through w: statement Patch, or PatchPlain for a
// PATCH with neither Comment nor Idempotency, each by id or ByIdentifier
// as byRef picks, which writes the activity rows, the comment and the
// record of the Idempotency-Key (CTE rec) itself. With edges changed, w
// is a READ COMMITTED transaction: a try that lost runs again on a new
// snapshot of it. A concurrent duplicate that recorded the key first
// fails it with a unique violation.
func (d *Driver) IssuePatch(ctx context.Context, w store.Querier, p *store.IssueUpdateParams) (*store.LockAnswer, error) {
	args := namedArgs(store.PatchArgs(store.Args(lockArgs(p.Ref, p.Actor)), p))
	name := byRef(args, "PatchPlain", "PatchPlainByIdentifier")
	if p.Comment != nil || p.Idempotency != nil {
		name = byRef(args, "Patch", "PatchByIdentifier")
		args["comment"], args["comment_id"] = p.Comment, d.newID()
		idemArgs(args, p.Idempotency, store.IdemIssueUpdate)
	}
	l, err := scanLockAnswer(name, w.QueryRow(ctx, name, store.Args(args)))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound("issue", p.Ref)
	}
	return l, store.Wrap(err, "update issue %s", p.Ref)
}
