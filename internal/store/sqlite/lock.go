package sqlite

// The lock rules L1-L7 and the sweeper's passes (RULES.md): each rule is
// ONE conditional UPDATE of sql/lock.sql whose WHERE clause is the
// decision, with its activity rows written here in the same write
// transaction. When a rule's fast path matches nothing, LockRead reads the
// issue's lock state for the audit details and, when the unrestricted
// UPDATE matches nothing too, internal/store/lockrules.go explains the
// refusal from it; nothing here decides whether to write.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// sweepBatch bounds the rows one sweeper transaction changes.
const sweepBatch = 500

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
	rid, rident := splitRef(ref)
	var l store.LockState
	err := t.queryRow(ctx, "LockRead", sql.Named("rid", rid), sql.Named("rident", rident), sql.Named("company", company),
		sql.Named("run", lq.run), sql.Named("agent", lq.agent), sql.Named("set_assignee", lq.setAssignee),
		sql.Named("assignee", lq.assignee), sql.Named("now", t.now)).
		Scan(&l.IssueID, &l.CompanyID, &l.Status, &l.Assignee, &l.Checkout, &l.Execution, &l.CheckoutState, &l.ExecutionState,
			&l.CallerAgent, &l.CallerCompany, &l.CallerState, &l.OwnedByCaller, &l.AgentActive, &l.AssigneeInCompany)
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

// IssueCheckout applies rules L1-L3: for an agent actor, its run
// Actor.RunID takes both locks of issue Ref (statement Checkout); for the
// board (S12) the issue is assigned to AgentID and set in_progress with no
// lock (BoardCheckout). It answers the issue after the write (or, L2, as
// it stands). Errors: those of store.ValidateCheckout, 404 not_found, and
// the refusals of store.CheckoutRefused and store.BoardCheckoutRefused.
func (s *Store) IssueCheckout(ctx context.Context, p *store.IssueCheckoutParams) (*clasp.Issue, error) {
	expected, err := store.ValidateCheckout(p)
	if err != nil {
		return nil, err
	}
	a := p.Actor
	var out *clasp.Issue
	err = s.write(ctx, func(tx *wtx) error {
		var err error
		if a.IsBoard() {
			out, err = tx.boardCheckout(ctx, p.Ref, p.AgentID, expected, a)
		} else {
			out, err = tx.checkout(ctx, p.Ref, p.AgentID, expected, a, p.Result)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// checkout is L1-L3 for agent agentID's run a.RunID on issue ref.
func (t *wtx) checkout(ctx context.Context, ref, agentID string, expected []string, a store.Actor, res *store.CheckoutResult) (*clasp.Issue, error) {
	checkout := func(rid, rident, company string, unlockedOnly bool) (*clasp.Issue, error) {
		return scanIssue(t.queryRow(ctx, "Checkout", sql.Named("rid", rid), sql.Named("rident", rident), sql.Named("company", company),
			sql.Named("unlocked_only", unlockedOnly), sql.Named("agent", agentID), sql.Named("run", a.RunID),
			sql.Named("expected", expectedArg(expected)), sql.Named("now", t.now)))
	}
	// Fast path: an unlocked issue; nothing is displaced, nothing to read.
	rid, rident := splitRef(ref)
	iss, err := checkout(rid, rident, scope(a), true)
	old := &store.LockState{}
	if errors.Is(err, sql.ErrNoRows) {
		if old, err = t.lockRead(ctx, ref, scope(a), lockQuery{run: a.RunID, agent: agentID}); err != nil {
			return nil, err
		}
		iss, err = checkout(old.IssueID, "", "", false)
		if errors.Is(err, sql.ErrNoRows) {
			sameRun, err := store.CheckoutRefused(old, agentID, a.RunID, expected)
			if !sameRun {
				return nil, err
			}
			if res != nil { // L2
				res.SameRun = true
			}
			return t.issueByID(ctx, old.IssueID)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("check out issue %s: %w", ref, err)
	}
	if why, ok := old.Displaced(a.RunID); ok { // L3
		if res != nil {
			res.AdoptedWhy = why
		}
		if err := t.logActivity(ctx, iss.CompanyID, a, clasp.ActionIssueLockAdopted, "issue", iss.ID, lockAdoptedDetails{
			PreviousCheckoutRunID: ptrOrNil(old.Checkout), PreviousExecutionRunID: ptrOrNil(old.Execution), Why: why,
		}); err != nil {
			return nil, err
		}
	}
	if err := t.logActivity(ctx, iss.CompanyID, a, clasp.ActionIssueCheckedOut, "issue", iss.ID, checkedOutDetails{
		AgentID: agentID, RunID: a.RunID, CheckoutEpoch: iss.CheckoutEpoch,
	}); err != nil {
		return nil, err
	}
	return iss, nil
}

// boardCheckout is S12: the board assigns issue ref to agentID and sets it
// in_progress with no lock.
func (t *wtx) boardCheckout(ctx context.Context, ref, agentID string, expected []string, a store.Actor) (*clasp.Issue, error) {
	old, err := t.lockRead(ctx, ref, "", lockQuery{agent: agentID})
	if err != nil {
		return nil, err
	}
	iss, err := scanIssue(t.queryRow(ctx, "BoardCheckout", sql.Named("id", old.IssueID), sql.Named("agent", agentID),
		sql.Named("expected", expectedArg(expected)), sql.Named("now", t.now)))
	if errors.Is(err, sql.ErrNoRows) {
		if noop, err := store.BoardCheckoutRefused(old, agentID, expected); !noop {
			return nil, err
		}
		return t.issueByID(ctx, old.IssueID) // already so: nothing to write
	}
	if err != nil {
		return nil, fmt.Errorf("board checkout of issue %s: %w", old.IssueID, err)
	}
	changes := map[string]any{}
	if old.Status != string(clasp.IssueInProgress) {
		changes["status"] = map[string]any{"from": old.Status, "to": clasp.IssueInProgress}
	}
	if old.Assignee == nil || *old.Assignee != agentID {
		changes["assigneeAgentId"] = map[string]any{"from": ptrOrNil(old.Assignee), "to": agentID}
	}
	err = t.logActivity(ctx, old.CompanyID, a, clasp.ActionIssueUpdated, "issue", old.IssueID, map[string]any{
		"changes": changes, "boardCheckout": true,
	})
	return iss, err
}

// agentInCompany answers 422 precondition_failed (naming field) unless
// agentID is a non-terminated agent of companyID.
func (t *wtx) agentInCompany(ctx context.Context, agentID, companyID, field string) error {
	var status string
	err := t.queryRow(ctx, "AgentStatusInCompany", sql.Named("id", agentID), sql.Named("company", companyID)).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) || status == string(clasp.AgentTerminated) {
		return clasp.Errorf(clasp.CodePreconditionFailed, "%s %q is not an active agent of the issue's company.", field, agentID).
			WithDetails("field", field)
	}
	if err != nil {
		return fmt.Errorf("read agent %s: %w", agentID, err)
	}
	return nil
}

// IssueRelease applies rule L4 (statement Release): the holding run, a
// live run of the assignee over a dead holder, or the board clears both
// locks; in_progress becomes todo; the assignee stays unless Unassign.
// Errors: 403 forbidden (store.ValidateRelease), 404 not_found, and the
// refusals of store.ReleaseRefused (which also says when an unlocked issue
// is answered unchanged).
func (s *Store) IssueRelease(ctx context.Context, p *store.IssueReleaseParams) (*clasp.Issue, error) {
	a := p.Actor
	if err := store.ValidateRelease(a); err != nil {
		return nil, err
	}
	rid, rident := splitRef(p.Ref)
	var out *clasp.Issue
	err := s.write(ctx, func(tx *wtx) error {
		release := func(rid, rident, company string, heldOnly bool) (*clasp.Issue, error) {
			return scanIssue(tx.queryRow(ctx, "Release", sql.Named("rid", rid), sql.Named("rident", rident), sql.Named("company", company),
				sql.Named("held_only", heldOnly), sql.Named("unassign", p.Unassign), sql.Named("board", a.IsBoard()),
				sql.Named("run", a.RunID), sql.Named("agent", a.AgentID), sql.Named("now", tx.now)))
		}
		// Fast path: the caller's run holds both locks, so they are the previous holders.
		old := heldByCaller(a.RunID)
		err := sql.ErrNoRows
		if a.RunID != "" {
			out, err = release(rid, rident, scope(a), true)
		}
		if errors.Is(err, sql.ErrNoRows) {
			if old, err = tx.lockRead(ctx, p.Ref, scope(a), lockQuery{run: a.RunID, agent: a.AgentID}); err != nil {
				return err
			}
			out, err = release(old.IssueID, "", "", false)
			if errors.Is(err, sql.ErrNoRows) {
				noop, err := store.ReleaseRefused(old, a)
				if noop {
					out, err = tx.issueByID(ctx, old.IssueID) // L4: releasing an unlocked issue is a no-op
				}
				return err
			}
		}
		if err != nil {
			return fmt.Errorf("release issue %s: %w", p.Ref, err)
		}
		return tx.logActivity(ctx, out.CompanyID, a, clasp.ActionIssueReleased, "issue", out.ID, releasedDetails{
			PreviousCheckoutRunID: ptrOrNil(old.Checkout), PreviousExecutionRunID: ptrOrNil(old.Execution), Unassigned: p.Unassign,
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// IssueForceRelease is the board's audited force-release (statement
// ForceRelease): every lock of issue Ref is cleared (and the assignee when
// ClearAssignee), in_progress becomes todo, and issue.admin_force_release
// {previousCheckoutRunId, previousExecutionRunId, reason} is written. 403
// forbidden for any actor but the board; 404 not_found.
func (s *Store) IssueForceRelease(ctx context.Context, p *store.IssueForceReleaseParams) (*clasp.Issue, error) {
	if err := store.ValidateForceRelease(p.Actor); err != nil {
		return nil, err
	}
	var out *clasp.Issue
	err := s.write(ctx, func(tx *wtx) error {
		old, err := tx.lockRead(ctx, p.Ref, "", lockQuery{})
		if err != nil {
			return err
		}
		if out, err = scanIssue(tx.queryRow(ctx, "ForceRelease", sql.Named("id", old.IssueID),
			sql.Named("clear_assignee", p.ClearAssignee), sql.Named("now", tx.now))); err != nil {
			return fmt.Errorf("force-release issue %s: %w", old.IssueID, err)
		}
		return tx.logActivity(ctx, old.CompanyID, p.Actor, clasp.ActionIssueForceRelease, "issue", old.IssueID, forceReleaseDetails{
			PreviousCheckoutRunID: ptrOrNil(old.Checkout), PreviousExecutionRunID: ptrOrNil(old.Execution),
			Reason: p.Reason, ClearAssignee: p.ClearAssignee,
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// IssueUpdate applies a PATCH under rules L5 and L6 in one conditional
// statement (Patch); Comment, when set, is written in the same
// transaction. While the issue is locked an agent's PATCH must come from
// its owner (the holding run, or a live run of the assignee over a dead
// holder, which then takes both locks over, as L3); moving the issue out
// of in_progress or changing its assignee clears both locks. Errors: those
// of p.Validate, 404 not_found, the refusals of store.PatchRefused, 422
// idempotency_key_reused. With p.Idempotency the key is looked up and
// recorded in the same write transaction (store.IssueUpdateParams): a
// replay writes nothing and answers the issue as it is now.
func (s *Store) IssueUpdate(ctx context.Context, p *store.IssueUpdateParams) (*clasp.Issue, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var out *clasp.Issue
	err := s.write(ctx, func(tx *wtx) error {
		if id, err := tx.idempotencyLookup(ctx, p.Idempotency, idemIssueUpdate); err != nil || id != "" {
			if err != nil {
				return err
			}
			out, err = tx.issueByID(ctx, id)
			p.Idempotency.Replayed = err == nil
			return err
		}
		var err error
		if out, err = tx.issueUpdate(ctx, p); err != nil {
			return err
		}
		return tx.idempotencyRecord(ctx, p.Idempotency, idemIssueUpdate, out.ID)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (t *wtx) issueUpdate(ctx context.Context, p *store.IssueUpdateParams) (*clasp.Issue, error) {
	a := p.Actor
	var status, priority, rank any
	if p.Status != nil {
		status = string(*p.Status)
	}
	if p.Priority != nil {
		priority, rank = string(*p.Priority), p.Priority.Rank()
	}
	var assignee any
	if p.AssigneeAgentID != nil {
		assignee = nullable(*p.AssigneeAgentID)
	}
	patch := func(rid, rident, company string, heldOnly bool) (*clasp.Issue, error) {
		return scanIssue(t.queryRow(ctx, "Patch", sql.Named("rid", rid), sql.Named("rident", rident), sql.Named("company", company),
			sql.Named("held_only", heldOnly), sql.Named("title", nullString(p.Title)), sql.Named("description", nullString(p.Description)),
			sql.Named("priority", priority), sql.Named("priority_rank", rank), sql.Named("status", status),
			sql.Named("set_assignee", p.AssigneeAgentID != nil), sql.Named("assignee", assignee),
			sql.Named("board", a.IsBoard()), sql.Named("run", a.RunID), sql.Named("agent", a.AgentID), sql.Named("now", t.now)))
	}
	// The fields as they were, for the audit row (issue.updated {changes}).
	before, err := t.auditFields(ctx, p.Ref, scope(a))
	if err != nil {
		return nil, err
	}
	// Fast path: the caller's run holds both locks, so they are the old lock columns.
	old := heldByCaller(a.RunID)
	var iss *clasp.Issue
	err = sql.ErrNoRows
	if a.Type == clasp.ActorAgent && a.RunID != "" {
		rid, rident := splitRef(p.Ref)
		iss, err = patch(rid, rident, scope(a), true)
	}
	if errors.Is(err, sql.ErrNoRows) {
		lq := lockQuery{run: a.RunID, agent: a.AgentID, setAssignee: p.AssigneeAgentID != nil, assignee: assignee}
		if old, err = t.lockRead(ctx, p.Ref, scope(a), lq); err != nil {
			return nil, err
		}
		iss, err = patch(old.IssueID, "", "", false)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, store.PatchRefused(old, p)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("update issue %s: %w", p.Ref, err)
	}

	// Lock activity: one row per lock change (L7).
	switch {
	case old.Locked() && iss.CheckoutRunID == nil && iss.ExecutionRunID == nil: // L6
		err = t.logActivity(ctx, iss.CompanyID, a, clasp.ActionIssueReleased, "issue", iss.ID, releasedDetails{
			PreviousCheckoutRunID: ptrOrNil(old.Checkout), PreviousExecutionRunID: ptrOrNil(old.Execution),
			Unassigned: p.AssigneeAgentID != nil && *p.AssigneeAgentID == "", Cause: "update",
		})
	case a.RunID != "" && old.Locked() && !old.HeldBy(a.RunID) && iss.CheckoutRunID != nil && *iss.CheckoutRunID == a.RunID: // L5 adoption
		if why, ok := old.Displaced(a.RunID); ok {
			err = t.logActivity(ctx, iss.CompanyID, a, clasp.ActionIssueLockAdopted, "issue", iss.ID, lockAdoptedDetails{
				PreviousCheckoutRunID: ptrOrNil(old.Checkout), PreviousExecutionRunID: ptrOrNil(old.Execution), Why: why,
			})
		}
		if err == nil {
			err = t.logActivity(ctx, iss.CompanyID, a, clasp.ActionIssueCheckedOut, "issue", iss.ID, checkedOutDetails{
				AgentID: a.AgentID, RunID: a.RunID, CheckoutEpoch: iss.CheckoutEpoch,
			})
		}
	}
	if err != nil {
		return nil, err
	}
	details := map[string]any{"changes": before.changes(iss)}
	if old.Locked() && iss.CheckoutRunID == nil && iss.ExecutionRunID == nil {
		details["locksCleared"] = true
		details["previousCheckoutRunId"] = ptrOrNil(old.Checkout)
		details["previousExecutionRunId"] = ptrOrNil(old.Execution)
	}
	if err := t.logActivity(ctx, iss.CompanyID, a, clasp.ActionIssueUpdated, "issue", iss.ID, details); err != nil {
		return nil, err
	}
	if p.Comment != nil {
		if _, err := t.commentInsert(ctx, iss.ID, iss.CompanyID, *p.Comment, a); err != nil {
			return nil, err
		}
	}
	return iss, nil
}

// auditFields are the fields of an issue that issue.updated reports as
// {changes: {field: {from, to}}} (the same shape on both stores).
type auditFields struct {
	title, description, status, priority string
	assignee                             sql.NullString
}

// auditFields reads the audited fields of issue ref (scoped to company when
// not empty) inside the write transaction (statement IssueAudit); a missing
// issue gives zero fields (the statement that follows answers not_found).
func (t *wtx) auditFields(ctx context.Context, ref, company string) (*auditFields, error) {
	rid, rident := splitRef(ref)
	f := &auditFields{}
	err := t.queryRow(ctx, "IssueAudit", sql.Named("rid", rid), sql.Named("rident", rident), sql.Named("company", company)).
		Scan(&f.title, &f.description, &f.status, &f.priority, &f.assignee)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("read issue %s for audit: %w", ref, err)
	}
	return f, nil
}

// changes returns {field: {from, to}} for each audited field that differs
// in iss; descriptions are cut to 200 characters.
func (f *auditFields) changes(iss *clasp.Issue) map[string]any {
	m := map[string]any{}
	add := func(name string, from, to any, differ bool) {
		if differ {
			m[name] = map[string]any{"from": from, "to": to}
		}
	}
	cut := func(s string) string {
		if r := []rune(s); len(r) > 200 {
			return string(r[:200])
		}
		return s
	}
	add("title", f.title, iss.Title, f.title != iss.Title)
	add("description", cut(f.description), cut(iss.Description), f.description != iss.Description)
	add("status", f.status, iss.Status, f.status != string(iss.Status))
	add("priority", f.priority, iss.Priority, f.priority != string(iss.Priority))
	newAssignee := ""
	if iss.AssigneeAgentID != nil {
		newAssignee = *iss.AssigneeAgentID
	}
	add("assigneeAgentId", orNil(f.assignee), iss.AssigneeAgentID, f.assignee.String != newAssignee)
	return m
}

// RunFinish ends run RunID with terminal Status and, in the same
// transaction, clears every lock naming it with one issue.lock_released
// {runId, runStatus} per issue (rule L6), then writes run.finished. An
// agent may finish only its own live run; the board any non-terminal run.
// Errors: 400 invalid_request (status not terminal), 404 not_found, 403
// run_not_owned, 409 run_not_live (terminal, or lost for an agent).
func (s *Store) RunFinish(ctx context.Context, p *store.RunFinishParams) (*clasp.Run, error) {
	if err := store.ValidateRunFinish(p); err != nil {
		return nil, err
	}
	a := p.Actor
	var out *clasp.Run
	err := s.write(ctx, func(tx *wtx) error {
		run, err := scanRun(tx.queryRow(ctx, "RunFinish", sql.Named("run", p.RunID), sql.Named("status", string(p.Status)),
			sql.Named("exit_code", intArg(p.ExitCode)), sql.Named("error", nullString(p.Error)),
			sql.Named("error_code", nullString(p.ErrorCode)),
			sql.Named("board", a.Type != clasp.ActorAgent), sql.Named("agent", a.AgentID), sql.Named("company", a.CompanyID),
			sql.Named("now", tx.now)))
		if errors.Is(err, sql.ErrNoRows) {
			return tx.runFinishRefused(ctx, p)
		}
		if err != nil {
			return fmt.Errorf("finish run %s: %w", p.RunID, err)
		}
		out = run
		if err := tx.releaseRunLocks(ctx, run, a); err != nil {
			return err
		}
		return tx.logActivity(ctx, run.CompanyID, a, clasp.ActionRunFinished, "run", run.ID, map[string]any{
			"status": run.Status, "exitCode": run.ExitCode, "error": run.Error,
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// releaseRunLocks is L6 for a run that has just ended: one statement clears
// every lock column naming it, one issue.lock_released per issue.
func (t *wtx) releaseRunLocks(ctx context.Context, run *clasp.Run, a store.Actor) error {
	rows, err := t.query(ctx, "ReleaseRunLocks", sql.Named("run", run.ID), sql.Named("now", t.now))
	if err != nil {
		return fmt.Errorf("release locks of run %s: %w", run.ID, err)
	}
	type released struct{ id, companyID string }
	issues, err := scanRows(rows, func(r *released) []any { return []any{&r.id, &r.companyID} })
	if err != nil {
		return fmt.Errorf("release locks of run %s: %w", run.ID, err)
	}
	for _, r := range issues {
		if err := t.logActivity(ctx, r.companyID, a, clasp.ActionIssueLockReleased, "issue", r.id, lockReleasedDetails{
			RunID: run.ID, RunStatus: run.Status,
		}); err != nil {
			return err
		}
	}
	// The wakes deferred behind this run are promoted in the same
	// transaction (heartbeat.go).
	return t.promoteBlockedBy(ctx, run.ID)
}

// runFinishRefused explains a finish whose UPDATE matched no row
// (store.RunRefusal).
func (t *wtx) runFinishRefused(ctx context.Context, p *store.RunFinishParams) error {
	r, err := t.callerRun(ctx, p.RunID)
	if err != nil {
		return err
	}
	if err := store.RunRefusal(p.Actor, p.RunID, r.Found, r.AgentID, r.CompanyID, r.State); err != nil {
		return err
	}
	return fmt.Errorf("finish run %s: refused for no known reason", p.RunID)
}

// callerRun reads run runID's agent, company and state (statement
// CallerRunRead) to explain a refusal; Found false when it does not exist.
func (t *wtx) callerRun(ctx context.Context, runID string) (store.RunState, error) {
	r := store.RunState{Found: true}
	err := t.queryRow(ctx, "CallerRunRead", sql.Named("run", runID), sql.Named("now", t.now)).Scan(&r.AgentID, &r.CompanyID, &r.State)
	if errors.Is(err, sql.ErrNoRows) {
		return store.RunState{}, nil
	}
	if err != nil {
		return r, fmt.Errorf("read run %s: %w", runID, err)
	}
	return r, nil
}

// SweepExpiredRuns is sweeper pass 1 (statement SweepExpiredRuns): running runs whose
// lease expired become failed with errorCode lease_expired, in batches of
// sweepBatch per transaction, one run.lost row each (actor system). It
// returns how many runs it failed. Safe to run concurrently.
func (s *Store) SweepExpiredRuns(ctx context.Context) (int, error) {
	total := 0
	for {
		n := 0
		err := s.write(ctx, func(tx *wtx) error {
			rows, err := tx.query(ctx, "SweepExpiredRuns", sql.Named("now", tx.now), sql.Named("limit", sweepBatch))
			if err != nil {
				return fmt.Errorf("sweep expired runs: %w", err)
			}
			type lost struct {
				id, companyID, agentID string
				lease                  int64
			}
			runs, err := scanRows(rows, func(r *lost) []any { return []any{&r.id, &r.companyID, &r.agentID, &r.lease} })
			if err != nil {
				return fmt.Errorf("sweep expired runs: %w", err)
			}
			for _, r := range runs {
				if err := tx.logActivity(ctx, r.companyID, systemActor, clasp.ActionRunLost, "run", r.id, map[string]any{
					"agentId": r.agentID, "errorCode": clasp.RunErrorLeaseExpired, "leaseExpiresAt": fromMicros(r.lease),
				}); err != nil {
					return err
				}
			}
			n = len(runs)
			return nil
		})
		total += n
		if err != nil {
			return total, err
		}
		if n < sweepBatch {
			return total, nil
		}
	}
}

// staleLock is a candidate of sweeper pass 2.
type staleLock struct {
	id, companyID                 string
	checkout, execution           sql.NullString
	checkoutState, executionState sql.NullString
}

// SweepStaleLocks is sweeper pass 2 (StaleLockCandidates, then ClearStaleLocks per issue): the locks of issues
// whose referenced runs are all dead (terminal, lost or missing) are
// cleared, each by a compare-and-set on the old lock values that re-checks
// deadness, with one issue.stale_lock_cleared {clearedCheckoutRunId,
// clearedExecutionRunId, why} each (actor system); at most sweepBatch
// issues per transaction. It returns how many issues it cleared; a second
// pass clears nothing, and concurrent sweepers clear each issue once.
func (s *Store) SweepStaleLocks(ctx context.Context) (int, error) {
	total := 0
	for {
		cands, err := s.staleLockCandidates(ctx)
		if err != nil || len(cands) == 0 {
			return total, err
		}
		n := 0
		err = s.write(ctx, func(tx *wtx) error {
			n = 0
			for _, c := range cands {
				res, err := tx.exec(ctx, "ClearStaleLocks", sql.Named("id", c.id), sql.Named("old_checkout", orNil(c.checkout)),
					sql.Named("old_execution", orNil(c.execution)), sql.Named("now", tx.now))
				if err != nil {
					return fmt.Errorf("clear stale lock of issue %s: %w", c.id, err)
				}
				if k, _ := res.RowsAffected(); k == 0 {
					continue // changed since it was read: a checkout or another sweeper came first
				}
				why := c.checkoutState.String
				if !c.checkout.Valid {
					why = c.executionState.String
				}
				if err := tx.logActivity(ctx, c.companyID, systemActor, clasp.ActionIssueStaleLockCleared, "issue", c.id, staleLockDetails{
					ClearedCheckoutRunID: orNil(c.checkout), ClearedExecutionRunID: orNil(c.execution), Why: why,
				}); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		total += n
		if err != nil {
			return total, err
		}
		if len(cands) < sweepBatch || n == 0 {
			return total, nil
		}
	}
}

func (s *Store) staleLockCandidates(ctx context.Context) ([]staleLock, error) {
	rows, err := s.read(ctx, "StaleLockCandidates", sql.Named("now", s.nowMicros()), sql.Named("limit", sweepBatch))
	if err != nil {
		return nil, fmt.Errorf("find stale locks: %w", err)
	}
	out, err := scanRows(rows, func(c *staleLock) []any {
		return []any{&c.id, &c.companyID, &c.checkout, &c.execution, &c.checkoutState, &c.executionState}
	})
	if err != nil {
		return nil, fmt.Errorf("find stale locks: %w", err)
	}
	return out, nil
}

// systemActor is the sweeper's actor in activity rows.
var systemActor = store.Actor{Type: clasp.ActorSystem}

// Details of the lock activity rows (the same shapes PostgreSQL builds in sql/lock.sql).
type (
	checkedOutDetails struct {
		AgentID       string `json:"agentId"`
		RunID         string `json:"runId"`
		CheckoutEpoch int64  `json:"checkoutEpoch"`
	}
	lockAdoptedDetails struct {
		PreviousCheckoutRunID  any    `json:"previousCheckoutRunId"`
		PreviousExecutionRunID any    `json:"previousExecutionRunId"`
		Why                    string `json:"why"`
	}
	releasedDetails struct {
		PreviousCheckoutRunID  any    `json:"previousCheckoutRunId"`
		PreviousExecutionRunID any    `json:"previousExecutionRunId"`
		Unassigned             bool   `json:"unassigned"`
		Cause                  string `json:"cause,omitempty"` // "update" when a PATCH released it (L6)
	}
	lockReleasedDetails struct {
		RunID     string          `json:"runId"`
		RunStatus clasp.RunStatus `json:"runStatus"`
	}
	staleLockDetails struct {
		ClearedCheckoutRunID  any    `json:"clearedCheckoutRunId"`
		ClearedExecutionRunID any    `json:"clearedExecutionRunId"`
		Why                   string `json:"why"`
	}
	forceReleaseDetails struct {
		PreviousCheckoutRunID  any    `json:"previousCheckoutRunId"`
		PreviousExecutionRunID any    `json:"previousExecutionRunId"`
		Reason                 string `json:"reason"`
		ClearAssignee          bool   `json:"clearAssignee"`
	}
)

// ptrOrNil is *p, or nil (JSON null) when p is nil.
func ptrOrNil(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}
