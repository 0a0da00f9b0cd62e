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
	"encoding/json"
	"errors"
	"fmt"
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
		&l.CallerAgent, &l.CallerCompany, &l.CallerState, &l.OwnedByCaller, &l.AgentActive, &l.AssigneeInCompany, &l.UnresolvedBlockers)
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

// logAll writes rows, in order, as actor a's.
func (t *wtx) logAll(ctx context.Context, a store.Actor, rows ...store.Activity) error {
	for _, r := range rows {
		if err := t.logActivity(ctx, r.CompanyID, a, r.Action, r.EntityType, r.EntityID, r.Details); err != nil {
			return err
		}
	}
	return nil
}

// expectedArg renders expected statuses as ",s1,s2," for instr(:expected, ...).
func expectedArg(expected []string) string { return "," + strings.Join(expected, ",") + "," }

// IssueCheckout applies rules L1-L3: for an agent actor, its run
// Actor.RunID takes both locks of issue Ref (statement Checkout); for the
// board (S12) the issue is assigned to AgentID and set in_progress with no
// lock (BoardCheckout). It answers the issue after the write (or, L2, as
// it stands). An agent's checkout waits for one of the same issue (same
// reference) already running in this process (store.Inflight); the
// checkouts released together after it share one read of the issue on a
// reader, taken after that release (waitersRefusal), and those the rule
// refuses on it answer without entering the writer. Errors: those of
// store.ValidateCheckout, 404 not_found, and the refusals of
// store.CheckoutRefused and store.BoardCheckoutRefused.
func (s *Store) IssueCheckout(ctx context.Context, p *store.IssueCheckoutParams) (*clasp.Issue, error) {
	expected, err := store.ValidateCheckout(p)
	if err != nil {
		return nil, err
	}
	a := p.Actor
	if !a.IsBoard() {
		done, batch, err := s.checkouts.Enter(ctx, store.CheckoutKey(a.CompanyID, p.Ref), a.RunID)
		if err != nil {
			return nil, err
		}
		defer done()
		if batch != nil {
			if err := s.waitersRefusal(ctx, batch, p.Ref, p.AgentID, expected, a); err != nil {
				return nil, err
			}
		}
	}
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

// waitersRefusal is the refusal of run a.RunID's checkout of ref, a member
// of batch (store.Inflight), decided on the issue's lock state that the
// batch reads once on a reader connection (statement CheckoutWaitersRead,
// store.Shared) after it was released: the error of
// store.WaitersState.CheckoutRefusal. A refusal writes nothing, so deciding
// it outside the writer gives the answer the writer would give at the
// moment of that read, which lies after this call began; a refusal is
// never decided on a state read before that. 404 not_found when the issue
// does not exist then; the read's error when it failed. nil means the rule
// may write, or L2 answers the row as it stands: the caller goes to the
// writer, where the rule decides again.
func (s *Store) waitersRefusal(ctx context.Context, batch *store.Batch, ref, agentID string, expected []string, a store.Actor) error {
	w, err := store.Shared(ctx, batch, func(ctx context.Context, runs []string) (*store.WaitersState, error) {
		return s.checkoutWaitersRead(ctx, ref, store.Scope(a), runs)
	})
	switch {
	case err != nil:
		return err
	case w == nil:
		return notFound("issue", ref)
	}
	return w.CheckoutRefusal(agentID, a.RunID, expected)
}

// checkoutWaitersRead reads, on a reader, issue ref's lock state in
// company ("" for any) and the runs runs (statement CheckoutWaitersRead);
// nil when the issue does not exist.
func (s *Store) checkoutWaitersRead(ctx context.Context, ref, company string, runs []string) (*store.WaitersState, error) {
	ids, err := json.Marshal(runs)
	if err != nil {
		return nil, err
	}
	rid, rident := store.SplitRef(ref)
	rows, err := s.read(ctx, "CheckoutWaitersRead", sql.Named("rid", rid), sql.Named("rident", rident), sql.Named("company", company),
		sql.Named("runs", string(ids)), sql.Named("now", s.nowMicros()))
	if err != nil {
		return nil, fmt.Errorf("read issue %s for its waiting checkouts: %w", ref, err)
	}
	defer rows.Close()
	var w *store.WaitersState
	for rows.Next() {
		if w == nil {
			w = &store.WaitersState{Runs: make(map[string]store.RunState, len(runs))}
		}
		var (
			l         store.LockState
			id        *string
			r         store.RunState
			agent, co *string
			state     *string
		)
		if err := rows.Scan(&l.IssueID, &l.CompanyID, &l.Status, &l.Assignee, &l.Checkout, &l.Execution, &l.CheckoutState, &l.ExecutionState,
			&id, &agent, &co, &state); err != nil {
			return nil, fmt.Errorf("read issue %s for its waiting checkouts: %w", ref, err)
		}
		w.Issue = l
		if id != nil {
			r.Found, r.AgentID, r.CompanyID, r.State = true, *agent, *co, *state
			w.Runs[*id] = r
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read issue %s for its waiting checkouts: %w", ref, err)
	}
	return w, nil
}

// checkout is L1-L3 for agent agentID's run a.RunID on issue ref.
func (t *wtx) checkout(ctx context.Context, ref, agentID string, expected []string, a store.Actor, res *store.CheckoutResult) (*clasp.Issue, error) {
	args := store.LockArgs(ref, a)
	args["agent"], args["expected"] = agentID, expectedArg(expected)
	// Fast path: an unlocked issue; nothing is displaced, nothing to read.
	args["unlocked_only"] = true
	iss, err := store.ScanIssue(writer{t}.QueryRow(ctx, "Checkout", args))
	old := &store.LockState{}
	if errors.Is(err, sql.ErrNoRows) {
		if old, err = t.lockRead(ctx, ref, store.Scope(a), lockQuery{run: a.RunID, agent: agentID}); err != nil {
			return nil, err
		}
		args["rid"], args["rident"], args["company"], args["unlocked_only"] = old.IssueID, "", "", false
		iss, err = store.ScanIssue(writer{t}.QueryRow(ctx, "Checkout", args))
		if errors.Is(err, sql.ErrNoRows) {
			sameRun, err := store.CheckoutRefused(old, agentID, a.RunID, expected)
			if !sameRun {
				return nil, store.BlockedDetails(ctx, writer{t}, err) // D1 names the blockers
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
	rows, why := store.CheckoutActivity(old, iss, agentID, a.RunID)
	if why != "" && res != nil { // L3
		res.AdoptedWhy = why
	}
	return iss, t.logAll(ctx, a, rows...)
}

// boardCheckout is S12: the board assigns issue ref to agentID and sets it
// in_progress with no lock.
func (t *wtx) boardCheckout(ctx context.Context, ref, agentID string, expected []string, a store.Actor) (*clasp.Issue, error) {
	old, err := t.lockRead(ctx, ref, "", lockQuery{agent: agentID})
	if err != nil {
		return nil, err
	}
	iss, err := store.ScanIssue(t.queryRow(ctx, "BoardCheckout", sql.Named("id", old.IssueID), sql.Named("agent", agentID),
		sql.Named("expected", expectedArg(expected)), sql.Named("now", t.now)))
	if errors.Is(err, sql.ErrNoRows) {
		if noop, err := store.BoardCheckoutRefused(old, agentID, expected); !noop {
			return nil, store.BlockedDetails(ctx, writer{t}, err) // D1 names the blockers
		}
		return t.issueByID(ctx, old.IssueID) // already so: nothing to write
	}
	if err != nil {
		return nil, fmt.Errorf("board checkout of issue %s: %w", old.IssueID, err)
	}
	return iss, t.logAll(ctx, a, store.BoardCheckoutActivity(old, iss, agentID))
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
	var out *clasp.Issue
	err := s.write(ctx, func(tx *wtx) error {
		args := store.LockArgs(p.Ref, a)
		args["unassign"] = p.Unassign
		// Fast path: the caller's run holds both locks, so they are the previous holders.
		old := heldByCaller(a.RunID)
		err := sql.ErrNoRows
		if a.RunID != "" {
			args["held_only"] = true
			out, err = store.ScanIssue(writer{tx}.QueryRow(ctx, "Release", args))
		}
		if errors.Is(err, sql.ErrNoRows) {
			if old, err = tx.lockRead(ctx, p.Ref, store.Scope(a), lockQuery{run: a.RunID, agent: a.AgentID}); err != nil {
				return err
			}
			args["rid"], args["rident"], args["company"], args["held_only"] = old.IssueID, "", "", false
			out, err = store.ScanIssue(writer{tx}.QueryRow(ctx, "Release", args))
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
		return tx.logAll(ctx, a, store.ReleaseActivity(old, out, p.Unassign))
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
		if out, err = store.ScanIssue(tx.queryRow(ctx, "ForceRelease", sql.Named("id", old.IssueID),
			sql.Named("clear_assignee", p.ClearAssignee), sql.Named("now", tx.now))); err != nil {
			return fmt.Errorf("force-release issue %s: %w", old.IssueID, err)
		}
		return tx.logAll(ctx, p.Actor, store.ForceReleaseActivity(old, out, p.Reason, p.ClearAssignee))
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
		if id, err := tx.idempotencyLookup(ctx, p.Idempotency, store.IdemIssueUpdate); err != nil || id != "" {
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
		return tx.idempotencyRecord(ctx, p.Idempotency, store.IdemIssueUpdate, out.ID)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (t *wtx) issueUpdate(ctx context.Context, p *store.IssueUpdateParams) (*clasp.Issue, error) {
	a := p.Actor
	// D5: the edges first, so that the status change below decides on
	// the new count (removing the last blocker and finishing in one PATCH)
	if err := store.ApplyPatchDeps(ctx, writer{t}, driver{t.s}, p); err != nil {
		return nil, err
	}
	args := store.PatchArgs(store.LockArgs(p.Ref, a), p)
	// The fields as they were, for the audit row (issue.updated {changes}).
	before, err := t.auditFields(ctx, p.Ref, store.Scope(a))
	if err != nil {
		return nil, err
	}
	// Fast path: the caller's run holds both locks, so they are the old lock columns.
	old := heldByCaller(a.RunID)
	var iss *clasp.Issue
	err = sql.ErrNoRows
	if a.Type == clasp.ActorAgent && a.RunID != "" {
		args["held_only"] = true
		iss, err = store.ScanIssue(writer{t}.QueryRow(ctx, "Patch", args))
	}
	if errors.Is(err, sql.ErrNoRows) {
		lq := lockQuery{run: a.RunID, agent: a.AgentID, setAssignee: p.AssigneeAgentID != nil, assignee: args["assignee"]}
		if old, err = t.lockRead(ctx, p.Ref, store.Scope(a), lq); err != nil {
			return nil, err
		}
		args["rid"], args["rident"], args["company"], args["held_only"] = old.IssueID, "", "", false
		iss, err = store.ScanIssue(writer{t}.QueryRow(ctx, "Patch", args))
		if errors.Is(err, sql.ErrNoRows) {
			return nil, store.BlockedDetails(ctx, writer{t}, store.PatchRefused(old, p))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("update issue %s: %w", p.Ref, err)
	}

	if err := t.logAll(ctx, a, store.PatchActivity(before, old, iss, p)...); err != nil {
		return nil, err
	}
	if p.Comment != nil {
		if _, err := t.commentInsert(ctx, iss.ID, iss.CompanyID, *p.Comment, a); err != nil {
			return nil, err
		}
	}
	return iss, nil
}

// auditFields reads the audited fields of issue ref (scoped to company when
// not empty) inside the write transaction (statement IssueAudit); a missing
// issue gives zero fields (the statement that follows answers not_found).
func (t *wtx) auditFields(ctx context.Context, ref, company string) (*store.AuditFields, error) {
	rid, rident := store.SplitRef(ref)
	f := &store.AuditFields{}
	err := t.queryRow(ctx, "IssueAudit", sql.Named("rid", rid), sql.Named("rident", rident), sql.Named("company", company)).
		Scan(&f.Title, &f.Description, &f.Status, &f.Priority, &f.Assignee)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("read issue %s for audit: %w", ref, err)
	}
	return f, nil
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
		run, err := store.ScanRun(tx.queryRow(ctx, "RunFinish", sql.Named("run", p.RunID), sql.Named("status", string(p.Status)),
			sql.Named("exit_code", intArg(p.ExitCode)), sql.Named("error", nullString(p.Error)),
			sql.Named("error_code", nullString(p.ErrorCode)),
			sql.Named("board", a.Type != clasp.ActorAgent), sql.Named("agent", a.AgentID), sql.Named("company", a.CompanyID),
			sql.Named("now", tx.now)))
		if errors.Is(err, sql.ErrNoRows) {
			r, err := tx.callerRun(ctx, p.RunID)
			if err != nil {
				return err
			}
			return store.RunRefusal(a, p.RunID, r)
		}
		if err != nil {
			return fmt.Errorf("finish run %s: %w", p.RunID, err)
		}
		out = run
		if err := tx.releaseRunLocks(ctx, run, a); err != nil {
			return err
		}
		return tx.logAll(ctx, a, store.RunFinishedActivity(run))
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
		if err := t.logAll(ctx, a, store.LockReleasedActivity(r.id, r.companyID, run)); err != nil {
			return err
		}
	}
	// The wakes deferred behind this run are promoted in the same
	// transaction (heartbeat.go).
	return t.promoteBlockedBy(ctx, run.ID)
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

// SweepExpiredRuns is sweeper pass 1 (statement SweepExpiredRuns):
// running runs whose lease expired become failed with errorCode
// lease_expired, in batches of store.SweepBatch per transaction, one
// run.lost row each (actor system). It returns how many runs it failed.
// Safe to run concurrently.
func (s *Store) SweepExpiredRuns(ctx context.Context) (int, error) {
	return store.Sweep(func() (n, changed int, err error) {
		err = s.write(ctx, func(tx *wtx) error {
			rows, err := tx.query(ctx, "SweepExpiredRuns", sql.Named("now", tx.now), sql.Named("limit", store.SweepBatch))
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
				if err := tx.logActivity(ctx, r.companyID, store.SystemActor, clasp.ActionRunLost, "run", r.id, map[string]any{
					"agentId": r.agentID, "errorCode": clasp.RunErrorLeaseExpired, "leaseExpiresAt": fromMicros(r.lease),
				}); err != nil {
					return err
				}
			}
			n = len(runs)
			return nil
		})
		return n, n, err
	})
}

// SweepStaleLocks is sweeper pass 2: the locks of issues whose referenced
// runs are all dead (terminal, lost or missing; statement
// StaleLockCandidates, on a reader) are cleared, each by a compare-and-set
// on the old lock values that re-checks deadness (ClearStaleLocks), with
// one issue.stale_lock_cleared each (store.StaleLock.Activity, actor
// system); at most store.SweepBatch issues per transaction. It returns how
// many issues it cleared; a second pass clears nothing, and concurrent
// sweepers clear each issue once.
func (s *Store) SweepStaleLocks(ctx context.Context) (int, error) {
	return store.Sweep(func() (found, cleared int, err error) {
		rows, err := s.read(ctx, "StaleLockCandidates", sql.Named("now", s.nowMicros()), sql.Named("limit", store.SweepBatch))
		if err != nil {
			return 0, 0, fmt.Errorf("find stale locks: %w", err)
		}
		cands, err := scanRows(rows, func(c *store.StaleLock) []any {
			return []any{&c.IssueID, &c.CompanyID, &c.Checkout, &c.Execution, &c.CheckoutState, &c.ExecutionState}
		})
		if err != nil || len(cands) == 0 {
			return 0, 0, wrap(err, "find stale locks")
		}
		err = s.write(ctx, func(tx *wtx) error {
			cleared = 0
			for _, c := range cands {
				res, err := tx.exec(ctx, "ClearStaleLocks", sql.Named("id", c.IssueID), sql.Named("old_checkout", store.OrNil(c.Checkout)),
					sql.Named("old_execution", store.OrNil(c.Execution)), sql.Named("now", tx.now))
				if err != nil {
					return fmt.Errorf("clear stale lock of issue %s: %w", c.IssueID, err)
				}
				if k, _ := res.RowsAffected(); k == 0 {
					continue // changed since it was read: a checkout or another sweeper came first
				}
				if err := tx.logAll(ctx, store.SystemActor, c.Activity()); err != nil {
					return err
				}
				cleared++
			}
			return nil
		})
		return len(cands), cleared, err
	})
}
