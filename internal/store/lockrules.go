package store

// The dialect-neutral half of the lock rules L1-L7 (RULES.md): the lock
// state a rule's statement answers, and what a refusal means. Each rule is
// ONE conditional statement per dialect (internal/store/<dialect>/sql/
// lock.sql); nothing here decides whether to write. When a statement
// changed nothing, the functions below read the state it answered and
// build the error (or the no-op answer), in the order of the statement's
// WHERE clauses, so both stores answer every refusal alike.
//
// A run is live iff it exists and is queued, or running with a lease that
// has not expired. A holder is dead when its run is terminal, lost
// (running with an expired lease) or missing.

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/clasp-dev/clasp"
)

// Run states as the lock statements name them (columns checkout_state,
// execution_state, caller_state).
const (
	RunLive     = "live"
	RunLost     = "lost"
	RunTerminal = "terminal"
	RunMissing  = "missing"
)

// LockState is an issue's lock state before a lock rule's statement, as the
// statement answers it: the issue's columns, the states of the runs its lock
// columns name (RunLive, RunLost, RunTerminal or RunMissing; nil for an
// empty column), the caller's run (nil fields when it does not exist) and
// the rule-specific conditions, each in a column of its own name.
type LockState struct {
	// Ref is how the caller named the issue (its UUID or its
	// identifier), which a refusal's message repeats (Name); set by the
	// caller of the rule, not by its statement.
	Ref                           string
	IssueID, CompanyID, Status    string
	Assignee, Checkout, Execution *string
	CheckoutState, ExecutionState *string
	// The caller's run: its agent, company and state; nil when no run of
	// that id exists.
	CallerAgent, CallerCompany, CallerState *string
	// OwnedByCaller (column owned_by_caller, L3/L4/L5): the caller's run
	// is live, the calling agent's and in the issue's company; each lock
	// column is empty, that run, or names a dead run; and the run holds a
	// lock or the agent is the assignee adopting a dead holder.
	OwnedByCaller bool
	// AgentActive (column agent_active, board checkout S12): the agent the
	// board names is an agent of the issue's company, not terminated.
	AgentActive bool
	// AssigneeInCompany (column assignee_in_company, PATCH): the new
	// assignee, when the PATCH names one, is an agent of the issue's company.
	AssigneeInCompany bool
	// Escalated (column escalated, E3): the issue was escalated to a
	// person and is still blocked (read by the checkout's statement; false
	// in the answers of the rules that do not ask).
	Escalated bool
	// UnresolvedBlockers (column unresolved_blockers; PostgreSQL: the
	// answered issue's unresolved_blocker_count, the row before the
	// statement when it wrote nothing): how many of the issue's blockers
	// are not done (D1, D2).
	UnresolvedBlockers int
}

// Name is the issue as a refusal's message names it: the identifier as
// the caller typed it when it named the issue by its identifier, else its
// id. details.issueId is always the id.
func (l *LockState) Name() string { return refName(l.Ref, l.IssueID) }

// refName is how a message names the issue id that the caller named ref:
// ref as typed (without surrounding spaces) when it is an identifier, else
// id.
func refName(ref, id string) string {
	if _, ident := SplitRef(ref); ident != "" {
		return strings.TrimSpace(ref)
	}
	return id
}

// Locked reports whether a lock column is set.
func (l *LockState) Locked() bool { return l.Checkout != nil || l.Execution != nil }

// HeldBy reports whether run holds both locks (L2).
func (l *LockState) HeldBy(runID string) bool {
	return runID != "" && deref(l.Checkout) == runID && deref(l.Execution) == runID
}

// Displaced reports whether taking both locks for run displaces another
// run (L3), and why that holder was dead (its checkout lock's reason first).
func (l *LockState) Displaced(runID string) (why string, ok bool) {
	switch {
	case l.Checkout != nil && *l.Checkout != runID:
		return deref(l.CheckoutState), true
	case l.Execution != nil && *l.Execution != runID:
		return deref(l.ExecutionState), true
	}
	return "", false
}

// LiveOther reports whether a lock column names a live run other than runID.
func (l *LockState) LiveOther(runID string) bool {
	return (l.Checkout != nil && *l.Checkout != runID && deref(l.CheckoutState) == RunLive) ||
		(l.Execution != nil && *l.Execution != runID && deref(l.ExecutionState) == RunLive)
}

// CallerProblem explains why the caller's run runID did not qualify: 422
// run_not_found if it does not exist, 403 run_not_owned if it is another
// agent's or another company's, 409 run_not_live if it is terminal or lost.
// nil when the run is live and agentID's, in the issue's company.
func (l *LockState) CallerProblem(runID, agentID string) error {
	switch {
	case l.CallerState == nil:
		return ErrRunNotFound(runID)
	case deref(l.CallerAgent) != agentID:
		return ErrRunNotOwned(runID, false)
	case deref(l.CallerCompany) != l.CompanyID:
		return ErrRunNotOwned(runID, true)
	case *l.CallerState != RunLive:
		return ErrRunNotLive(runID, *l.CallerState)
	}
	return nil
}

// ValidateCheckout checks a checkout before its statement runs and returns
// its expected statuses (L1). Errors: 400 invalid_request (expectedStatuses
// empty or unknown, agentId missing), 422 precondition_failed (a closed
// status expected), 401 run_id_required (an agent without a run), 403
// agent_mismatch (an agent checking out for another), 403 forbidden (an
// actor neither an agent nor the board).
func ValidateCheckout(p *IssueCheckoutParams) ([]string, error) {
	expected, err := ValidateExpected(p.ExpectedStatuses, "checkout")
	if err != nil {
		return nil, err
	}
	if p.AgentID == "" {
		return nil, clasp.InvalidField("agentId", "Field \"agentId\" is required: the id of the agent checking out.")
	}
	a := p.Actor
	switch {
	case a.Type == clasp.ActorAgent && a.RunID == "":
		return nil, clasp.Errorf(clasp.CodeRunIDRequired, "A checkout needs the run it is made in (header X-Clasp-Run-Id or X-Paperclip-Run-Id).")
	case a.Type == clasp.ActorAgent && p.AgentID != a.AgentID:
		return nil, ErrAgentMismatch(a.AgentID, p.AgentID)
	case a.Type != clasp.ActorAgent && !a.IsBoard():
		return nil, clasp.Errorf(clasp.CodeForbidden, "Only agents and the board check issues out.")
	}
	return expected, nil
}

// ValidateExpected checks the expected statuses of a checkout (what
// "checkout") or a claim ("claim") and returns them as strings: 400
// invalid_request (details.field expectedStatuses) when there are none or
// one is not an issue status, then 422 precondition_failed for a closed
// one. The HTTP layer calls it as it reads the body, the store again for
// every other caller: one rule, one wording.
func ValidateExpected(statuses []clasp.IssueStatus, what string) ([]string, error) {
	if len(statuses) == 0 {
		msg := "Field \"expectedStatuses\" must be a non-empty list of issue statuses."
		if what == "claim" {
			msg = "Field \"expectedStatuses\" must be a non-empty list of issue statuses, or left out for [todo]."
		}
		return nil, clasp.InvalidField("expectedStatuses", "%s", msg)
	}
	for _, st := range statuses {
		if !st.Valid() {
			names := make([]string, len(clasp.IssueStatuses))
			for i, v := range clasp.IssueStatuses {
				names[i] = string(v)
			}
			return nil, clasp.InvalidField("expectedStatuses", "Field \"expectedStatuses\" must list only %s; not %q.",
				strings.Join(names, ", "), truncate(string(st), 64))
		}
	}
	expected := make([]string, 0, len(statuses))
	for _, st := range statuses {
		if st.Closed() {
			return nil, clasp.Errorf(clasp.CodePreconditionFailed,
				"A %s never expects %s: closed issues cannot be checked out.", what, st).WithDetails("field", "expectedStatuses")
		}
		expected = append(expected, string(st))
	}
	return expected, nil
}

// truncate is s cut to at most n bytes, on a rune boundary, with "..."
// when it was cut: a message repeats at most that much of a caller's
// value.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// CheckoutRefused explains an agent's checkout (L1-L3) whose statement
// changed nothing, in the order of its WHERE: the caller's run problem
// (CallerProblem); L2, the run holds both locks already (sameRun true, nil
// error: the caller answers the issue as it stands); else a 409
// checkout_conflict (CheckoutConflict).
func CheckoutRefused(l *LockState, agentID, runID string, expected []string) (sameRun bool, err error) {
	if err := l.CallerProblem(runID, agentID); err != nil {
		return false, err
	}
	if l.HeldBy(runID) {
		return true, nil
	}
	return false, CheckoutConflict(l, agentID, runID, expected)
}

// WaitersState is an issue's lock state read once for a Batch of
// checkouts that waited for another checkout of it (store.Inflight;
// statement CheckoutWaitersRead of each dialect): the issue's columns and
// the states of the runs its lock columns name (Issue; its caller fields
// unset), and the runs of the batch's members by id (a run with no row is
// absent), all of one snapshot taken after the batch was released.
type WaitersState struct {
	Issue LockState
	Runs  map[string]RunState
}

// CheckoutRefusal is the answer the checkout rule (L1-L3) gives agentID's
// run runID on state w, for the issue the caller named ref, when that
// answer is a refusal: the error of CheckoutRefused for w.Issue with
// runID's run as the caller's (422
// run_not_found, 403 run_not_owned, 409 run_not_live, 409
// checkout_conflict). nil when the rule's statement must decide: it would
// write (a free issue, a dead holder to adopt: L1, L3; adoption is the
// statement's alone), or runID holds the issue (L2, answered by the
// statement as the row stands). A refusal is decided here only on a state
// read after runID's call began (Shared's rule), so it is the answer the
// statement would have given at a moment inside that call.
func (w *WaitersState) CheckoutRefusal(ref, agentID, runID string, expected []string) error {
	l := w.Issue // a copy: w is shared by the batch's members
	l.Ref = ref
	if r, ok := w.Runs[runID]; ok {
		l.CallerAgent, l.CallerCompany, l.CallerState = &r.AgentID, &r.CompanyID, &r.State
	}
	sameRun, err := CheckoutRefused(&l, agentID, runID, expected)
	if sameRun || clasp.AsError(err) == nil {
		return nil // L2, or no refusal explains this state: the statement decides
	}
	return err
}

// BoardCheckoutRefused explains a board checkout (S12) whose statement
// changed nothing: 422 precondition_failed when agentID is no active agent
// of the issue's company; noop true when the issue is in_progress and
// agentID's already with no live holder (the caller answers it as it
// stands); else a 409 checkout_conflict (CheckoutConflict).
func BoardCheckoutRefused(l *LockState, agentID string, expected []string) (noop bool, err error) {
	switch {
	case !l.AgentActive:
		return false, clasp.Errorf(clasp.CodePreconditionFailed, "agentId %q is not an active agent of the issue's company.", agentID).
			WithDetails("field", "agentId")
	case l.Status == string(clasp.IssueInProgress) && deref(l.Assignee) == agentID && !l.LiveOther(""):
		return true, nil
	}
	return false, CheckoutConflict(l, agentID, "", expected)
}

// CheckoutConflict is the 409 checkout_conflict of a refused checkout of
// the issue in state l by run runID ("" for the board) of agentID, with
// details {issueId, status, assigneeAgentId, checkoutRunId, executionRunId,
// reason}; reason is, in this order, assigned_to_other_agent,
// held_by_live_run, status_not_expected. After those, an issue not yet
// in_progress with unresolved blockers is 422 blocked_by_unresolved (D1,
// details completed by BlockedDetails). A state that explains none of
// them is an internal error.
func CheckoutConflict(l *LockState, agentID, runID string, expected []string) error {
	var reason string
	switch {
	case l.Assignee != nil && *l.Assignee != agentID:
		reason = clasp.ReasonAssignedToOtherAgent
	case l.LiveOther(runID):
		reason = clasp.ReasonHeldByLiveRun
	case !slices.Contains(expected, l.Status) && (l.Status != string(clasp.IssueInProgress) || deref(l.Assignee) != agentID):
		reason = clasp.ReasonStatusNotExpected
	case l.UnresolvedBlockers > 0 && l.Status != string(clasp.IssueInProgress):
		// D1: after the 409 reasons, entering in_progress with a blocker
		// not done; the store names the blockers (BlockedDetails)
		return errBlocked(l)
	case l.Escalated:
		// E3: after the other reasons, an escalated issue is a person's
		return clasp.Errorf(clasp.CodePreconditionFailed,
			"Issue %s was escalated to a person after its runs kept failing: no agent takes it until a person moves it out of blocked.",
			l.Name()).WithDetails("issueId", l.IssueID, "status", l.Status, "assigneeAgentId", OrNil(l.Assignee), "reason", WakeReasonIssueEscalated)
	default:
		return fmt.Errorf("check out issue %s: refused for no known reason", l.IssueID)
	}
	e := &clasp.Error{Code: clasp.CodeCheckoutConflict, Message: "Issue " + l.Name() + " cannot be checked out: " + conflictText[reason] + ".",
		Details: make(map[string]any, 6)}
	return e.WithDetails("issueId", l.IssueID, "status", l.Status, "assigneeAgentId", OrNil(l.Assignee),
		"checkoutRunId", OrNil(l.Checkout), "executionRunId", OrNil(l.Execution), "reason", reason)
}

// conflictText is each checkout conflict reason in words, as its message
// ends.
var conflictText = map[string]string{
	clasp.ReasonAssignedToOtherAgent: strings.ReplaceAll(clasp.ReasonAssignedToOtherAgent, "_", " "),
	clasp.ReasonHeldByLiveRun:        strings.ReplaceAll(clasp.ReasonHeldByLiveRun, "_", " "),
	clasp.ReasonStatusNotExpected:    strings.ReplaceAll(clasp.ReasonStatusNotExpected, "_", " "),
}

// OwnershipConflict is the 409 ownership_conflict of rules L4/L5 for the
// issue in state l, with details {issueId, status, assigneeAgentId,
// checkoutRunId, executionRunId}; why ends the message.
func OwnershipConflict(l *LockState, why string) error {
	return clasp.Errorf(clasp.CodeOwnershipConflict, "Issue %s cannot be changed by this run: %s.", l.Name(), why).
		WithDetails("issueId", l.IssueID, "status", l.Status, "assigneeAgentId", OrNil(l.Assignee),
			"checkoutRunId", OrNil(l.Checkout), "executionRunId", OrNil(l.Execution))
}

// ValidateRelease is the actor check of a release (L4): 403 forbidden for
// an actor neither an agent nor the board.
func ValidateRelease(a Actor) error {
	if a.Type != clasp.ActorAgent && !a.IsBoard() {
		return clasp.Errorf(clasp.CodeForbidden, "Only agents and the board release issues.")
	}
	return nil
}

// ValidateForceRelease is the actor check of a force-release: 403
// forbidden for any actor but the board.
func ValidateForceRelease(a Actor) error {
	if !a.IsBoard() {
		return clasp.Errorf(clasp.CodeForbidden, "Only the board may force-release an issue.")
	}
	return nil
}

// ReleaseRefused explains a release (L4) by actor a whose statement changed
// nothing. An unlocked issue: noop true (the caller answers it unchanged)
// when a is the board or its assignee or it is unassigned, else 409
// ownership_conflict. A locked one: the caller's run problem, else 409
// ownership_conflict.
func ReleaseRefused(l *LockState, a Actor) (noop bool, err error) {
	if !l.Locked() {
		if a.IsBoard() || l.Assignee == nil || *l.Assignee == a.AgentID {
			return true, nil
		}
		return false, OwnershipConflict(l, "it is assigned to another agent")
	}
	if a.RunID != "" {
		if err := l.CallerProblem(a.RunID, a.AgentID); err != nil {
			return false, err
		}
	}
	return false, OwnershipConflict(l, "another run holds it, or you are not its assignee")
}

// PatchRefused explains a PATCH (L5/L6) whose statement changed nothing, in
// the order of its WHERE: ownership of a locked issue by an agent (409
// ownership_conflict, or the caller's run problem); an agent moving an
// escalated issue out of blocked (422, reason issue_escalated, E4);
// entering in_progress without an assignee (422); an assignee outside the issue's company (422);
// entering in_progress or done with unresolved blockers (422
// blocked_by_unresolved, D1/D2).
func PatchRefused(l *LockState, p *IssueUpdateParams) error {
	a := p.Actor
	if !a.IsBoard() && l.Locked() {
		if a.RunID == "" {
			return OwnershipConflict(l, "it is locked and this request names no run")
		}
		if err := l.CallerProblem(a.RunID, a.AgentID); err != nil {
			return err
		}
		if !l.OwnedByCaller {
			return OwnershipConflict(l, "another run holds it")
		}
	}
	if !a.IsBoard() && l.Escalated && p.Status != nil && *p.Status != clasp.IssueBlocked {
		// E4: a person, not an agent, ends an escalation
		return clasp.Errorf(clasp.CodePreconditionFailed,
			"Issue %s was escalated to a person after its runs kept failing: only a person (the board or an operator) moves it out of blocked.",
			l.Name()).WithDetails("issueId", l.IssueID, "status", l.Status, "field", "status", "reason", WakeReasonIssueEscalated)
	}
	newAssignee := deref(l.Assignee)
	if p.AssigneeAgentID != nil {
		newAssignee = *p.AssigneeAgentID
	}
	if p.Status != nil && *p.Status == clasp.IssueInProgress && l.Status != string(clasp.IssueInProgress) && newAssignee == "" {
		return clasp.Errorf(clasp.CodePreconditionFailed, "An issue moves into in_progress only with an assignee.").
			WithDetails("field", "assigneeAgentId")
	}
	if !l.AssigneeInCompany {
		return clasp.Errorf(clasp.CodePreconditionFailed, "assigneeAgentId %q is not an agent of the issue's company.", newAssignee).
			WithDetails("field", "assigneeAgentId")
	}
	if p.Status != nil && (*p.Status == clasp.IssueInProgress || *p.Status == clasp.IssueDone) &&
		l.Status != string(*p.Status) && l.UnresolvedBlockers > 0 {
		return errBlocked(l) // D1/D2; the store names the blockers (BlockedDetails)
	}
	return fmt.Errorf("update issue %s: refused for no known reason", l.IssueID)
}

// ValidateRunFinish checks a run's finish before its statement runs: 400
// invalid_request for a status that is not terminal or an exit code that
// is not a 32-bit integer.
func ValidateRunFinish(p *RunFinishParams) error {
	if !p.Status.Terminal() {
		return clasp.InvalidField("status", "status must be succeeded, failed, cancelled or timed_out.")
	}
	if p.ExitCode != nil && (*p.ExitCode < math.MinInt32 || *p.ExitCode > math.MaxInt32) {
		return clasp.InvalidField("exitCode", "exitCode must be a 32-bit integer.")
	}
	return nil
}

// RunState is a run as a refusal reads it (statement CallerRunRead):
// whether it exists, its agent, company and state (RunLive, RunLost or
// RunTerminal).
type RunState struct {
	Found                     bool
	AgentID, CompanyID, State string
}

// CallerProblem is LockState.CallerProblem for the caller's run runID read
// on its own (r), acting on companyID.
func (r RunState) CallerProblem(runID, agentID, companyID string) error {
	l := LockState{CompanyID: companyID}
	if r.Found {
		l.CallerAgent, l.CallerCompany, l.CallerState = &r.AgentID, &r.CompanyID, &r.State
	}
	return l.CallerProblem(runID, agentID)
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// orNil is *p, or nil (JSON null) when p is nil.
func OrNil(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

// LockArgs are the arguments every lock rule statement takes, by the same
// names in both dialects (sql/lock.sql): the issue reference ref (rid,
// rident: SplitRef) within actor a's scope (company: Scope), a's run and
// agent, and whether a is the board.
func LockArgs(ref string, a Actor) Args {
	// Sized for what the lock rules add (ActorArgs, the checkout's and the
	// PATCH's arguments), so that the map is allocated once.
	return FillLockArgs(make(Args, lockArgsSize), ref, a)
}

// FillLockArgs is LockArgs into args, an empty map (one a dialect reuses),
// which it returns.
func FillLockArgs(args Args, ref string, a Actor) Args {
	rid, rident := SplitRef(ref)
	args["rid"], args["rident"], args["company"] = rid, rident, Scope(a)
	args["run"], args["agent"], args["board"] = a.RunID, a.AgentID, a.IsBoard()
	return args
}

// lockArgsSize is the most arguments a lock rule statement takes:
// LockArgs' six, ActorArgs' four, and up to eight more of the rule (the
// checkout's expected statuses, PatchArgs' seven).
const lockArgsSize = 18

// PatchArgs adds to args the arguments statement Patch takes for PATCH p
// (L5/L6) and returns args: title and description (nil: unchanged),
// status, priority and priority_rank (nil: unchanged), set_assignee and
// assignee (nil: unassign).
func PatchArgs(args Args, p *IssueUpdateParams) Args {
	args["title"], args["description"] = p.Title, p.Description
	args["status"], args["priority"], args["priority_rank"] = nil, nil, nil
	if p.Status != nil {
		args["status"] = string(*p.Status)
	}
	if p.Priority != nil {
		args["priority"], args["priority_rank"] = string(*p.Priority), p.Priority.Rank()
	}
	args["set_assignee"], args["assignee"] = p.AssigneeAgentID != nil, nil
	if p.AssigneeAgentID != nil {
		args["assignee"] = nullable(*p.AssigneeAgentID)
	}
	return args
}

// LockOutcome is what one run of a lock rule's statement did, as its
// answer says (PostgreSQL, sql/lock.sql: columns changed, ok, run_ended).
type LockOutcome int

const (
	// LockWritten: the statement wrote the issue and its activity rows.
	LockWritten LockOutcome = iota
	// LockRefused: the rule refuses on the statement's snapshot (or, L2,
	// answers the row as it stands); nothing was written.
	LockRefused
	// LockRowChanged: the rule decided to write, but the issue's row
	// changed after the statement's snapshot (its compare-and-set on the
	// row version failed); nothing was written.
	LockRowChanged
	// LockRunEnded: the rule decided to take the locks for the caller's
	// run, but that run was no longer live on its latest row when the
	// statement locked it (it ended after the snapshot); nothing was
	// written.
	LockRunEnded
)

// Outcome is the outcome of a lock rule's statement from its answer
// columns changed (it wrote), ok (it decided to write) and runEnded (the
// caller's run was not live when the statement locked it).
func Outcome(changed, ok, runEnded bool) LockOutcome {
	switch {
	case changed:
		return LockWritten
	case !ok:
		return LockRefused
	case runEnded:
		return LockRunEnded
	}
	return LockRowChanged
}

// LockTries bounds the runs of a lock rule's statement in one call
// (RULES.md, Lock rules).
const LockTries = 50

// RunLockRule runs try, one run of a lock rule's statement on a fresh
// snapshot, again while its outcome is LockRowChanged or LockRunEnded, at
// most LockTries times (RULES.md, Lock rules): each try sees the state
// the last one lost to, so under contention the next one usually
// refuses, and after an ended run it refuses with run_not_live. It
// returns the answer of the try that wrote or refused, or try's error
// (then at once); after LockTries tries that each lost, an internal
// error naming what and ref; ctx's error when ctx ends between tries.
func RunLockRule[T any](ctx context.Context, what, ref string, try func() (T, LockOutcome, error)) (T, error) {
	var zero T
	for range LockTries {
		answer, outcome, err := try()
		switch {
		case err != nil:
			return zero, err
		case outcome == LockWritten || outcome == LockRefused:
			return answer, nil
		case ctx.Err() != nil:
			return zero, ctx.Err()
		}
	}
	return zero, fmt.Errorf("%s %s: the issue kept changing under %d tries", what, ref, LockTries)
}

// SweepBatch bounds the rows one sweeper transaction changes.
const SweepBatch = 500

// Sweep runs a sweeper pass as batches of at most SweepBatch rows, each
// one transaction: batch returns how many candidates it found and how many
// of them it changed. It stops after an error, a batch that found fewer
// than SweepBatch or one that changed nothing, and returns how many rows
// all batches changed.
func Sweep(batch func() (found, changed int, err error)) (int, error) {
	total := 0
	for {
		found, changed, err := batch()
		total += changed
		if err != nil || found < SweepBatch || changed == 0 {
			return total, err
		}
	}
}

// ValidateClaim checks a claim-next (L1) before its statement runs and
// returns the statuses of its two branches: unassigned (the company's
// unassigned issues) and mine (the agent's own: the expected statuses and
// in_progress, L1's inbox adoption case), each empty when Scope leaves the
// branch out, and the expected statuses. Errors: 400 invalid_request
// (scope, expectedStatuses), 422 precondition_failed (a closed status
// expected), 403 forbidden (not an agent), 401 run_id_required.
func ValidateClaim(p *IssueClaimParams) (unassigned, mine, expected []string, err error) {
	scope := p.Scope
	if scope == "" {
		scope = ClaimAny
	}
	if !scope.Valid() {
		return nil, nil, nil, clasp.InvalidField("scope", "scope %q: want mine, unassigned or any.", scope)
	}
	statuses := p.ExpectedStatuses
	if statuses == nil {
		statuses = []clasp.IssueStatus{clasp.IssueTodo}
	}
	a := p.Actor
	if expected, err = ValidateExpected(statuses, "claim"); err != nil {
		return nil, nil, nil, err
	}
	switch {
	case a.Type != clasp.ActorAgent:
		return nil, nil, nil, clasp.Errorf(clasp.CodeForbidden, "Only an agent, in a run, claims issues.")
	case a.RunID == "":
		return nil, nil, nil, clasp.Errorf(clasp.CodeRunIDRequired, "A claim needs the run it is made in (header X-Clasp-Run-Id or X-Paperclip-Run-Id).")
	}
	unassigned, mine = []string{}, []string{}
	for _, st := range expected {
		if scope != ClaimMine {
			unassigned = append(unassigned, st)
		}
		if scope != ClaimUnassigned && st != string(clasp.IssueInProgress) {
			mine = append(mine, st)
		}
	}
	if scope != ClaimUnassigned {
		mine = append(mine, string(clasp.IssueInProgress)) // L1: in_progress and the agent's
	}
	return unassigned, mine, expected, nil
}
