package store

// The checkout and release rules (L1-L4, S12 and the board's
// force-release; RULES.md, Lock rules) written once for every dialect:
// validation, the in-process queue of one issue's checkouts (Inflight),
// the retry policy (RunLockRule) and the explanation of a refusal
// (lockrules.go). A dialect's Driver runs one try of each rule's
// statement and answers a LockAnswer; it decides nothing, since the
// statement's WHERE clause is the decision.

import (
	"context"

	"github.com/clasp-dev/clasp"
)

// LockRequest is one lock rule call as its statement takes it: the issue
// reference Ref (a UUID or an identifier) within Actor's scope (Scope),
// and the rule's own arguments.
type LockRequest struct {
	Ref   string
	Actor Actor
	// AgentID and Expected (checkouts): the agent that takes the issue
	// and the statuses the issue may have (validated, none closed).
	AgentID  string
	Expected []string
	// Unassign (release): clear the assignee too.
	Unassign bool
	// Reason and ClearAssignee (force-release): the audited reason, and
	// whether the assignee is cleared too.
	Reason        string
	ClearAssignee bool
}

// LockAnswer is what one try of a lock rule's statement answers, in every
// dialect: whether it wrote (Changed), whether it decided to write (OK:
// OK && !Changed means it lost the row or, RunEnded, the caller's run
// under it; Outcome), the issue after the statement (as it stands, in
// the statement's own snapshot, when nothing was written: a no-op answer
// shows the issue the rule decided on), and the lock state before the
// statement (LockState), from which a refusal is explained.
type LockAnswer struct {
	Changed, OK, RunEnded bool
	Issue                 *clasp.Issue
	LockState
}

// Outcome is what this try did (Outcome of its columns).
func (l *LockAnswer) Outcome() LockOutcome { return Outcome(l.Changed, l.OK, l.RunEnded) }

// lockDriver is the part of Driver for the lock rules: each method
// runs ONE try of one rule's statement (in its own transaction, with the
// rule's activity rows when it writes) and answers it; the caller retries
// a try that lost (RunLockRule). Every method answers 404 not_found
// naming Ref when the issue does not exist in the actor's scope, and the
// translated error of the database otherwise.
type lockDriver interface {
	// IssueCheckout is rules L1-L3 for an agent's run (statement
	// Checkout): run Actor.RunID of agent AgentID takes both locks,
	// adopting a dead holder's (L3); L2 answers !OK.
	IssueCheckout(ctx context.Context, r *LockRequest) (*LockAnswer, error)
	// IssueBoardCheckout is S12 (statement BoardCheckout): the board
	// assigns the issue to AgentID and sets it in_progress, taking no
	// lock. LockState.AgentActive says whether AgentID is an active agent
	// of the issue's company.
	IssueBoardCheckout(ctx context.Context, r *LockRequest) (*LockAnswer, error)
	// IssueRelease is rule L4 (statement Release).
	IssueRelease(ctx context.Context, r *LockRequest) (*LockAnswer, error)
	// IssueForceRelease is the board's force-release (statement
	// ForceRelease): it always writes.
	IssueForceRelease(ctx context.Context, r *LockRequest) (*LockAnswer, error)
	// IssuePatch is rules L5 and L6 (statement Patch): one try of PATCH
	// p through q, the write Querier of the write Locks.IssueUpdate runs
	// it in (Write, or WriteTx when edges change, after them; a try that
	// lost runs again in that same write), which records the
	// Idempotency-Key after it (idempotent); when it writes, it writes
	// the activity rows and the comment in that write too.
	IssuePatch(ctx context.Context, q Querier, p *IssueUpdateParams) (*LockAnswer, error)
}

// Locks implements the Store methods of the checkout and release rules on
// a dialect's Driver. DB embeds it (NewLocks). Safe for
// concurrent use.
type Locks struct {
	d         Driver
	c         CRUD     // the Idempotency-Key lookup of a PATCH
	checkouts Inflight // this process's checkouts of one issue, queued behind the one running
}

// NewLocks returns the lock rules running on d, looking Idempotency-Keys
// up with c (the dialect's CRUD, on d).
func NewLocks(d Driver, c CRUD) *Locks { return &Locks{d: d, c: c} }

// Checkouts is the queue of this process's checkouts of one issue
// (Inflight), for tests that hold it.
func (l *Locks) Checkouts() *Inflight { return &l.checkouts }

// IssueCheckout applies rules L1-L3: for an agent actor, its run
// Actor.RunID takes both locks of issue Ref; for the board (S12) the issue
// is assigned to AgentID and set in_progress with no lock. It answers the
// issue after the write (or, L2, as it stands; p.Result says which, and
// why a dead holder was displaced, L3). An agent's checkout waits for one
// of the same issue (same reference) already running in this process
// (Inflight); the checkouts released together after it share one read of
// the issue taken after that release (waitersRefusal), and those the rule
// refuses on it answer without running the statement. Errors: those of
// ValidateCheckout, 404 not_found, and the refusals of CheckoutRefused and
// BoardCheckoutRefused (422 blocked_by_unresolved naming the blockers,
// BlockedDetails).
func (l *Locks) IssueCheckout(ctx context.Context, p *IssueCheckoutParams) (*clasp.Issue, error) {
	expected, err := ValidateCheckout(p)
	if err != nil {
		return nil, err
	}
	a := p.Actor
	r := &LockRequest{Ref: p.Ref, Actor: a, AgentID: p.AgentID, Expected: expected}
	if a.IsBoard() {
		ans, err := l.run(ctx, "board checkout of issue", r, l.d.IssueBoardCheckout)
		if err != nil || ans.Changed {
			return issueOf(ans, err)
		}
		ans.Ref = p.Ref
		if noop, err := BoardCheckoutRefused(&ans.LockState, p.AgentID, expected); !noop {
			return nil, l.blocked(ctx, err, p.Ref)
		}
		return issueOf(ans, nil)
	}
	done, batch, err := l.checkouts.Enter(ctx, CheckoutKey(a.CompanyID, p.Ref), a.RunID)
	if err != nil {
		return nil, err
	}
	if batch != nil {
		if err := l.waitersRefusal(ctx, batch, r); err != nil {
			done()
			return nil, err
		}
	}
	ans, err := l.run(ctx, "check out issue", r, l.d.IssueCheckout)
	done()
	if err != nil {
		return nil, err
	}
	if ans.Changed {
		if why, ok := ans.Displaced(a.RunID); ok && p.Result != nil { // L3
			p.Result.AdoptedWhy = why
		}
		return issueOf(ans, nil)
	}
	ans.Ref = p.Ref
	sameRun, err := CheckoutRefused(&ans.LockState, p.AgentID, a.RunID, expected)
	if !sameRun {
		return nil, l.blocked(ctx, err, p.Ref)
	}
	if p.Result != nil { // L2
		p.Result.SameRun = true
	}
	return issueOf(ans, nil)
}

// waitersRefusal is the refusal of r's checkout, a member of batch
// (Inflight), decided on the issue's lock state that the batch reads once
// (checkoutWaitersRead, Shared) after it was released: the
// error of WaitersState.CheckoutRefusal. A refusal writes nothing, so
// deciding it outside the statement gives the answer the statement would
// give at the moment of that read, which lies after this call began; a
// refusal is never decided on a state read before that. 404 not_found
// when the issue does not exist then; the read's error when it failed.
// nil means the rule may write, or L2 answers the row as it stands: the
// caller runs the statement, which decides.
func (l *Locks) waitersRefusal(ctx context.Context, batch *Batch, r *LockRequest) error {
	w, err := Shared(ctx, batch, func(ctx context.Context, runs []string) (*WaitersState, error) {
		return l.checkoutWaitersRead(ctx, r.Ref, Scope(r.Actor), runs)
	})
	switch {
	case err != nil:
		return l.d.Translate(Wrap(err, "read issue %s for its waiting checkouts", r.Ref))
	case w == nil:
		return ErrNotFound("issue", r.Ref)
	}
	return w.CheckoutRefusal(r.Ref, r.AgentID, r.Actor.RunID, r.Expected)
}

// checkoutWaitersRead reads issue ref's lock state within company ("" for
// any) and the runs runs, from one snapshot and writing nothing
// (statement CheckoutWaitersRead: the issue's columns and its lock
// holders' states on every row, then one row per run of runs that
// exists, its columns NULL when none does); nil when the issue does not
// exist.
func (l *Locks) checkoutWaitersRead(ctx context.Context, ref, company string, runs []string) (*WaitersState, error) {
	rid, rident := SplitRef(ref)
	rows, err := l.d.Read().Query(ctx, "CheckoutWaitersRead", Args{"rid": rid, "rident": rident, "company": company, "runs": runs})
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var w *WaitersState
	for rows.Next() {
		if w == nil {
			w = &WaitersState{Runs: make(map[string]RunState, len(runs))}
		}
		var id, agent, co, state *string
		is := &w.Issue
		if err := rows.Scan(&is.IssueID, &is.CompanyID, &is.Status, &is.Assignee, &is.Checkout, &is.Execution,
			&is.CheckoutState, &is.ExecutionState, &id, &agent, &co, &state); err != nil {
			return nil, err
		}
		if id != nil {
			w.Runs[*id] = RunState{Found: true, AgentID: deref(agent), CompanyID: deref(co), State: deref(state)}
		}
	}
	return w, rows.Err()
}

// IssueRelease applies rule L4: the holding run, a live run of the
// assignee over a dead holder, or the board clears both locks; in_progress
// becomes todo; the assignee stays unless Unassign. It answers the issue
// after the write, or unchanged when it was not locked. Errors: 403
// forbidden (ValidateRelease), 404 not_found, and the refusals of
// ReleaseRefused.
func (l *Locks) IssueRelease(ctx context.Context, p *IssueReleaseParams) (*clasp.Issue, error) {
	if err := ValidateRelease(p.Actor); err != nil {
		return nil, err
	}
	ans, err := l.run(ctx, "release issue", &LockRequest{Ref: p.Ref, Actor: p.Actor, Unassign: p.Unassign}, l.d.IssueRelease)
	if err != nil || ans.Changed {
		return issueOf(ans, err)
	}
	ans.Ref = p.Ref
	if noop, err := ReleaseRefused(&ans.LockState, p.Actor); !noop {
		return nil, err
	}
	return issueOf(ans, nil) // L4: releasing an unlocked issue is a no-op
}

// IssueForceRelease is the board's audited force-release: every lock of
// issue Ref is cleared (and the assignee when ClearAssignee), in_progress
// becomes todo, and issue.admin_force_release {previousCheckoutRunId,
// previousExecutionRunId, reason, clearAssignee} is written. 403
// forbidden for any actor but the board (ValidateForceRelease); 404
// not_found.
func (l *Locks) IssueForceRelease(ctx context.Context, p *IssueForceReleaseParams) (*clasp.Issue, error) {
	if err := ValidateForceRelease(p.Actor); err != nil {
		return nil, err
	}
	r := &LockRequest{Ref: p.Ref, Actor: p.Actor, Reason: p.Reason, ClearAssignee: p.ClearAssignee}
	ans, err := l.run(ctx, "force-release issue", r, l.d.IssueForceRelease)
	return issueOf(ans, err)
}

// IssueUpdate applies PATCH p under rules L5 and L6 and answers the issue
// after it: while the issue is locked an agent's PATCH must come from its
// owner (the holding run, or a live run of the assignee over a dead
// holder, which then takes both locks over, as L3); moving the issue out
// of in_progress or changing its assignee clears both locks. Its edges
// change first (ApplyPatchDeps, D5), so that its status change decides on
// the new count, then its statement (Driver.IssuePatch, again while
// it lost: RunLockRule), with its comment, in one write (WriteTx where
// the Driver has it and edges change). With p.Idempotency the key is
// looked up and recorded in that write (idempotent): a replay writes
// nothing and answers the issue as it is now. A PATCH can fail because of
// what a concurrent duplicate did (it released the lock): when the key is
// recorded after such a failure, the call answers the replay. Errors:
// those of p.Validate and ApplyPatchDeps, 404 not_found, the refusals of
// PatchRefused (422 blocked_by_unresolved naming the blockers,
// BlockedDetails), 422 idempotency_key_reused.
func (l *Locks) IssueUpdate(ctx context.Context, p *IssueUpdateParams) (*clasp.Issue, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	write := l.d.Write
	if tw, ok := l.d.(txWriter); ok && (p.BlockedByIssueIDs != nil || p.ParentID != nil) {
		write = tw.WriteTx
	}
	iss, err := idempotent(ctx, l.c, write, p.Idempotency, IdemIssueUpdate, issueID, func(q Querier) (*clasp.Issue, error) {
		if err := ApplyPatchDeps(ctx, q, l.d, p); err != nil {
			return nil, err
		}
		ans, err := RunLockRule(ctx, "update issue", p.Ref, func() (*LockAnswer, LockOutcome, error) {
			ans, err := l.d.IssuePatch(ctx, q, p)
			if err != nil {
				return nil, 0, err
			}
			return ans, ans.Outcome(), nil
		})
		if err != nil || ans.Changed {
			return issueOf(ans, err)
		}
		ans.Ref = p.Ref
		return nil, BlockedDetails(ctx, q, PatchRefused(&ans.LockState, p), p.Ref)
	}, replayIssue(ctx))
	if err != nil && p.Idempotency != nil && clasp.ErrorCode(err) != clasp.CodeIdempotencyKeyReused {
		var again *clasp.Issue
		_ = writeQuiet(l.d)(ctx, func(q Querier) error {
			if id, err := l.c.IdempotencyLookup(ctx, q, p.Idempotency, IdemIssueUpdate); err == nil && id != "" {
				again, _ = replayIssue(ctx)(q, id)
			}
			return nil
		})
		if again != nil {
			p.Idempotency.Replayed = true
			return again, nil
		}
	}
	return iss, err
}

// run runs one lock rule's try on r again while it lost (RunLockRule) and
// returns the last answer; what names the rule in the error of tries that
// all lost.
func (l *Locks) run(ctx context.Context, what string, r *LockRequest,
	try func(context.Context, *LockRequest) (*LockAnswer, error)) (*LockAnswer, error) {
	return RunLockRule(ctx, what, r.Ref, func() (*LockAnswer, LockOutcome, error) {
		ans, err := try(ctx, r)
		if err != nil {
			return nil, 0, err
		}
		return ans, ans.Outcome(), nil
	})
}

// issueOf is the issue of a lock rule's answer ans, or err when err is set.
func issueOf(ans *LockAnswer, err error) (*clasp.Issue, error) {
	if err != nil {
		return nil, err
	}
	return ans.Issue, nil
}

// blocked is refusal err of the issue the caller named ref, with the
// blockers named when it is 422 blocked_by_unresolved (BlockedDetails,
// D1); a failed read of them is translated as any database error.
func (l *Locks) blocked(ctx context.Context, err error, ref string) error {
	return l.d.Translate(BlockedDetails(ctx, l.d.Read(), err, ref))
}
