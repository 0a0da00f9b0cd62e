package storetest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// testPropertyL7 drives random sequences of checkout, release, PATCH (by
// agents and the board), force-release, board checkout, comment, run
// finish, crash (lease expiry), sweep and new runs from 4 goroutines (400
// operations each, 100 with -short or -race) over 5 issues and 3 agents, and
// checks after every operation, on every issue:
//   - L7: checkoutRunId set implies in_progress and executionRunId equal to it;
//   - a locked issue is assigned to the agent of the locking run;
//   - checkoutEpoch never decreases (per goroutine, whose reads are ordered);
//   - every successful checkout's (issue, epoch) went to one run only;
//   - after a run's finish or its sweep, no lock names it.
//
// At the end, no adoption displaced a run that is still live; then, once
// every run is over and swept: no lock is left, the
// issue.checked_out rows of each issue carry epochs 1..checkoutEpoch once
// each (every acquisition has its row), each recorded acquisition matches
// its row's run, and every acquisition was ended by exactly one row (L7):
// issue.released (a release, L4, or a PATCH that clears the locks, L6),
// issue.lock_released (a run's end, L6), issue.stale_lock_cleared (the
// sweeper), or issue.admin_force_release / issue.checkout_lock_adopted
// naming a previous checkout lock.
//
// The seed (logged) comes from CLASP_PROPERTY_SEED when set; it fixes each
// goroutine's operation sequence, not the interleaving.
func testPropertyL7(t *testing.T, open opener) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CLASP_PROPERTY_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CLASP_PROPERTY_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (CLASP_PROPERTY_SEED=%d replays the operation sequences; interleavings still vary)", seed, seed)
	const nWorkers, nIssues = 4, 5
	nOps := scale(400, 100)

	st, h := open(t)
	co := newCompany(t, st, "PROP")
	m := &propModel{t: t, st: st, h: h, co: co, runAgent: map[string]string{}, acquired: map[acqKey]string{}}
	for i := range 3 {
		m.agents = append(m.agents, newAgent(t, st, co.ID, fmt.Sprintf("agent-%d", i)))
	}
	for range nIssues {
		m.issues = append(m.issues, newIssue(t, st, co.ID, clasp.IssueTodo, "").ID)
	}

	var wg sync.WaitGroup
	workers := make([]*propWorker, nWorkers)
	for g := range workers {
		w := &propWorker{m: m, id: g, rng: rand.New(rand.NewPCG(seed, uint64(g))), runs: map[string]*clasp.Run{}, maxEpoch: map[string]int64{}, stats: map[string]int{}} // #nosec G404 -- a reproducible test schedule from the seed, not a secret
		workers[g] = w
		wg.Go(func() {
			for i := 0; i < nOps && !m.stop.Load(); i++ {
				w.step()
			}
		})
	}
	wg.Wait()
	stats := map[string]int{}
	for _, w := range workers {
		for k, v := range w.stats {
			stats[k] += v
		}
	}
	t.Logf("outcomes: %v", stats)
	if t.Failed() {
		return
	}
	m.final(t)
}

type acqKey struct {
	issue string
	epoch int64
}

// propModel is what the goroutines share.
type propModel struct {
	t      *testing.T
	st     store.Store
	h      Hooks
	co     *clasp.Company
	agents []*clasp.Agent
	issues []string
	stop   atomic.Bool

	mu       sync.Mutex
	runAgent map[string]string // every run opened → its agent
	acquired map[acqKey]string // (issue, epoch) of every successful checkout → the run
}

// propWorker is one goroutine: its own runs (one current run per agent),
// random source, history and the highest epoch it has seen per issue.
type propWorker struct {
	m        *propModel
	id       int
	rng      *rand.Rand
	runs     map[string]*clasp.Run
	maxEpoch map[string]int64
	hist     []string
	stats    map[string]int
}

func (w *propWorker) logf(format string, args ...any) {
	w.hist = append(w.hist, fmt.Sprintf(format, args...))
	if len(w.hist) > 40 {
		w.hist = w.hist[len(w.hist)-30:]
	}
}

func (w *propWorker) fail(format string, args ...any) {
	w.m.stop.Store(true)
	w.m.t.Errorf("goroutine %d: %s\nits last operations:\n  %s", w.id, fmt.Sprintf(format, args...), strings.Join(w.hist, "\n  "))
}

func (w *propWorker) agent() *clasp.Agent { return w.m.agents[w.rng.IntN(len(w.m.agents))] }
func (w *propWorker) issue() string       { return w.m.issues[w.rng.IntN(len(w.m.issues))] }

func (w *propWorker) expected() []clasp.IssueStatus {
	out := []clasp.IssueStatus{clasp.IssueTodo}
	if w.rng.IntN(5) == 0 {
		out = nil
	}
	for _, s := range []clasp.IssueStatus{clasp.IssueBacklog, clasp.IssueBlocked, clasp.IssueInReview, clasp.IssueInProgress} {
		if w.rng.IntN(4) == 0 {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		out = append(out, clasp.IssueBacklog)
	}
	return out
}

// liveRun returns this goroutine's live run of agent a, touching it first
// as the HTTP layer does, or opening a new one when it is over.
func (w *propWorker) liveRun(a *clasp.Agent) *clasp.Run {
	ctx := w.m.t.Context()
	if r := w.runs[a.ID]; r != nil {
		_, err := w.m.st.RunTouch(ctx, &store.RunTouchParams{RunID: r.ID, AgentID: a.ID, LeaseTTL: leaseTTL, MinRenewInterval: time.Second})
		switch clasp.ErrorCode(err) {
		case "":
			return r
		case clasp.CodeRunNotLive:
		default:
			w.fail("touch run %s: %v", short(r.ID), err)
			return nil
		}
	}
	r, err := w.m.st.RunOpen(ctx, runOpenParams(a, leaseTTL))
	if err != nil {
		w.fail("open run of %s: %v", a.Name, err)
		return nil
	}
	w.m.mu.Lock()
	w.m.runAgent[r.ID] = a.ID
	w.m.mu.Unlock()
	w.runs[a.ID] = r
	w.logf("open run %s of %s", short(r.ID), a.Name)
	return r
}

// outcome records err's code; it fails the test unless the code is allowed.
func (w *propWorker) outcome(op string, err error, allowed ...string) (string, bool) {
	code := clasp.ErrorCode(err)
	w.stats[op+":"+errText(err)]++
	if code == "" {
		return code, true
	}
	for _, a := range allowed {
		if code == a {
			return code, true
		}
	}
	w.fail("%s: unexpected error %v (code %q, allowed %v)", op, err, code, allowed)
	return code, false
}

func (w *propWorker) step() {
	ctx := w.m.t.Context()
	st := w.m.st
	ref := w.issue()
	switch n := w.rng.IntN(100); {
	case n < 30: // checkout by an agent's run, mostly the assignee's
		a := w.agentFor(ref)
		r := w.liveRun(a)
		if r == nil {
			return
		}
		exp := w.expected()
		iss, err := checkout(ctx, st, r, ref, exp...)
		w.logf("checkout %s by %s/%s %v: %s", short(ref), a.Name, short(r.ID), exp, result(iss, err))
		// an issue that crashes escalated (E3) refuses an agent expecting blocked
		code, ok := w.outcome("checkout", err, clasp.CodeCheckoutConflict, clasp.CodePreconditionFailed)
		if !ok {
			return
		}
		if err != nil {
			reason := asString(clasp.AsError(err).Details["reason"])
			w.stats["checkout-reason:"+reason]++
			switch {
			case code == clasp.CodePreconditionFailed && reason != store.WakeReasonIssueEscalated:
				w.fail("checkout refused with precondition_failed, reason %q; want issue_escalated (details %v)", reason, clasp.AsError(err).Details)
			case code == clasp.CodeCheckoutConflict && reason != clasp.ReasonHeldByLiveRun && reason != clasp.ReasonAssignedToOtherAgent &&
				reason != clasp.ReasonStatusNotExpected:
				w.fail("checkout conflict reason %q, want one of the three of L1 (details %v)", reason, clasp.AsError(err).Details)
			}
			break
		}
		if got := lockOf(iss); got.Status != clasp.IssueInProgress || got.Assignee != a.ID || got.CheckoutRun != r.ID || got.ExecutionRun != r.ID || got.Epoch < 1 {
			w.fail("checkout answer %+v, want held by %s of %s", got, short(r.ID), a.Name)
			return
		}
		w.seen(iss, "checkout answer")
		k := acqKey{ref, iss.CheckoutEpoch}
		w.m.mu.Lock()
		prev, dup := w.m.acquired[k]
		w.m.acquired[k] = r.ID
		w.m.mu.Unlock()
		if dup && prev != r.ID {
			w.fail("epoch %d of %s handed to two runs: %s and %s", k.epoch, short(ref), short(prev), short(r.ID))
		}
	case n < 42: // release by an agent's run or the board
		actor := boardActor()
		allowed := []string{}
		if w.rng.IntN(5) != 0 {
			r := w.liveRun(w.agentFor(ref))
			if r == nil {
				return
			}
			actor = runActor(r)
			allowed = append(allowed, clasp.CodeOwnershipConflict)
		}
		unassign := w.rng.IntN(3) == 0
		iss, err := release(ctx, st, actor, ref, unassign)
		w.logf("release %s by %s (unassign %v): %s", short(ref), actorName(actor), unassign, result(iss, err))
		if _, ok := w.outcome("release", err, allowed...); !ok || err != nil {
			return
		}
		if iss.CheckoutRunID != nil || iss.ExecutionRunID != nil {
			w.fail("release answer still locked: %+v", lockOf(iss))
		}
		w.seen(iss, "release answer")
	case n < 57: // PATCH by an agent's run, mostly the assignee's
		a := w.agentFor(ref)
		r := w.liveRun(a)
		if r == nil {
			return
		}
		p := store.IssueUpdateParams{Ref: ref, Actor: runActor(r)}
		allowed := []string{clasp.CodeOwnershipConflict}
		escalatable := false // a status change an escalated issue refuses an agent (E4)
		switch w.rng.IntN(4) {
		case 0:
			p.Status = ptr([]clasp.IssueStatus{clasp.IssueTodo, clasp.IssueInReview, clasp.IssueBlocked, clasp.IssueDone, clasp.IssueBacklog, clasp.IssueCancelled}[w.rng.IntN(6)])
			if escalatable = *p.Status != clasp.IssueBlocked; escalatable {
				allowed = append(allowed, clasp.CodePreconditionFailed)
			}
		case 1:
			p.Status = ptr(clasp.IssueInProgress)
			allowed = append(allowed, clasp.CodePreconditionFailed)
		case 2:
			p.AssigneeAgentID = ptr(w.assignee())
		case 3:
			p.Title = ptr(fmt.Sprintf("title %d", w.rng.IntN(1000)))
			p.Comment = ptr("note")
		}
		iss, err := st.IssueUpdate(ctx, &p)
		w.logf("agent PATCH %s by %s/%s %s: %s", short(ref), a.Name, short(r.ID), patchDesc(&p), result(iss, err))
		code, ok := w.outcome("agent-patch", err, allowed...)
		if ok && escalatable && code == clasp.CodePreconditionFailed {
			if reason := asString(clasp.AsError(err).Details["reason"]); reason != store.WakeReasonIssueEscalated {
				w.fail("agent PATCH of the status refused with precondition_failed, reason %q; want issue_escalated", reason)
			}
		}
		if !ok || err != nil {
			return
		}
		w.checkPatched(iss, &p)
	case n < 67: // PATCH by the board
		p := store.IssueUpdateParams{Ref: ref, Actor: boardActor()}
		switch w.rng.IntN(3) {
		case 0:
			p.Status = ptr(clasp.IssueStatuses[w.rng.IntN(len(clasp.IssueStatuses))])
		case 1:
			p.AssigneeAgentID = ptr(w.assignee())
		case 2:
			p.Status = ptr([]clasp.IssueStatus{clasp.IssueTodo, clasp.IssueTodo, clasp.IssueInProgress}[w.rng.IntN(3)])
			p.AssigneeAgentID = ptr(w.assignee())
		}
		var allowed []string
		if deref(p.Status) == clasp.IssueInProgress {
			allowed = append(allowed, clasp.CodePreconditionFailed)
		}
		iss, err := st.IssueUpdate(ctx, &p)
		w.logf("board PATCH %s %s: %s", short(ref), patchDesc(&p), result(iss, err))
		if _, ok := w.outcome("board-patch", err, allowed...); !ok || err != nil {
			return
		}
		w.checkPatched(iss, &p)
	case n < 73: // a run ends (by its agent or the board)
		a := w.agent()
		r := w.runs[a.ID]
		if r == nil {
			return
		}
		delete(w.runs, a.ID)
		actor := runActor(r)
		if w.rng.IntN(4) == 0 {
			actor = boardActor()
		}
		status := []clasp.RunStatus{clasp.RunSucceeded, clasp.RunFailed, clasp.RunCancelled, clasp.RunTimedOut}[w.rng.IntN(4)]
		_, err := st.RunFinish(ctx, &store.RunFinishParams{RunID: r.ID, Status: status, Actor: actor})
		w.logf("finish %s of %s as %s by %s: %s", short(r.ID), a.Name, status, actorName(actor), errText(err))
		if _, ok := w.outcome("finish", err, clasp.CodeRunNotLive); !ok {
			return
		}
		w.noLockNames(r.ID, "after its finish")
	case n < 78: // a run crashes and a sweeper pass runs
		a := w.agent()
		r := w.runs[a.ID]
		if r != nil {
			delete(w.runs, a.ID)
			if err := w.m.h.ExpireRunLease(ctx, r.ID); err != nil {
				w.fail("expire %s: %v", short(r.ID), err)
				return
			}
		}
		res, err := sweepOnce(ctx, st)
		w.logf("crash %s of %s, sweep: %+v %s", short(idOf(r)), a.Name, res, errText(err))
		if _, ok := w.outcome("crash-sweep", err); !ok || r == nil {
			return
		}
		got, err := st.RunGet(ctx, r.ID)
		if err != nil || got.Status != clasp.RunFailed || deref(got.ErrorCode) != clasp.RunErrorLeaseExpired {
			w.fail("run %s after expiry and sweep: got %+v, %v, want failed lease_expired", short(r.ID), got, err)
			return
		}
		w.noLockNames(r.ID, "after its sweep")
	case n < 83: // a run crashes (no sweep: others may adopt its locks)
		a := w.agent()
		r := w.runs[a.ID]
		if r == nil {
			return
		}
		delete(w.runs, a.ID)
		err := w.m.h.ExpireRunLease(ctx, r.ID)
		w.logf("crash %s of %s: %s", short(r.ID), a.Name, errText(err))
		w.outcome("crash", err)
	case n < 88: // a sweeper pass alone
		res, err := sweepOnce(ctx, st)
		w.logf("sweep: %+v %s", res, errText(err))
		w.outcome("sweep", err)
	case n < 92: // board force-release
		iss, err := st.IssueForceRelease(ctx, &store.IssueForceReleaseParams{Ref: ref, Reason: "property", ClearAssignee: w.rng.IntN(2) == 0, Actor: boardActor()})
		w.logf("force-release %s: %s", short(ref), result(iss, err))
		if _, ok := w.outcome("force-release", err); !ok {
			return
		}
		if iss.CheckoutRunID != nil || iss.ExecutionRunID != nil {
			w.fail("force-release answer still locked: %+v", lockOf(iss))
		}
		w.seen(iss, "force-release answer")
	case n < 96: // board checkout for an agent
		a := w.agent()
		exp := w.expected()
		iss, err := st.IssueCheckout(ctx, &store.IssueCheckoutParams{Ref: ref, AgentID: a.ID, ExpectedStatuses: exp, LeaseTTL: leaseTTL, Actor: boardActor()})
		w.logf("board checkout %s for %s %v: %s", short(ref), a.Name, exp, result(iss, err))
		if _, ok := w.outcome("board-checkout", err, clasp.CodeCheckoutConflict); !ok || err != nil {
			return
		}
		if iss.Status != clasp.IssueInProgress || deref(iss.AssigneeAgentID) != a.ID {
			w.fail("board checkout answer %+v, want in_progress assigned to %s", lockOf(iss), a.Name)
		}
		w.seen(iss, "board checkout answer")
	default: // comment by an agent's run
		r := w.liveRun(w.agent())
		if r == nil {
			return
		}
		_, err := st.CommentCreate(ctx, &store.CommentCreateParams{Ref: ref, Body: "progress", Actor: runActor(r)})
		w.logf("comment %s by %s: %s", short(ref), short(r.ID), errText(err))
		w.outcome("comment", err)
	}
	if !w.m.stop.Load() {
		w.observe()
	}
}

// agentFor picks an agent to act on issue ref: two times in three its
// current assignee (so that runs of one agent contend and adopt), else any.
func (w *propWorker) agentFor(ref string) *clasp.Agent {
	if w.rng.IntN(3) != 0 {
		if iss, err := w.m.st.IssueGet(w.m.t.Context(), "", ref); err == nil && iss.AssigneeAgentID != nil {
			for _, a := range w.m.agents {
				if a.ID == *iss.AssigneeAgentID {
					return a
				}
			}
		}
	}
	return w.agent()
}

func (w *propWorker) assignee() string {
	if w.rng.IntN(4) == 0 {
		return ""
	}
	return w.agent().ID
}

// checkPatched checks a successful PATCH's answer: a status other than
// in_progress (or a new assignee) comes with no lock (rule L6).
func (w *propWorker) checkPatched(iss *clasp.Issue, p *store.IssueUpdateParams) {
	if p.Status != nil && iss.Status != *p.Status {
		w.fail("PATCH answer status %s, want %s", iss.Status, *p.Status)
	}
	if p.AssigneeAgentID != nil && deref(iss.AssigneeAgentID) != *p.AssigneeAgentID {
		w.fail("PATCH answer assignee %q, want %q", deref(iss.AssigneeAgentID), *p.AssigneeAgentID)
	}
	if p.Status != nil && *p.Status != clasp.IssueInProgress && (iss.CheckoutRunID != nil || iss.ExecutionRunID != nil) {
		w.fail("PATCH to %s left locks %+v (L6)", *p.Status, lockOf(iss))
	}
	w.seen(iss, "PATCH answer")
}

// seen checks one observation of an issue: L7, the holder's agent is the
// assignee, and the epoch has not gone down since this goroutine last saw it.
func (w *propWorker) seen(iss *clasp.Issue, what string) {
	if v := l7Violation(iss); v != "" {
		w.fail("%s: L7 violated on %s: %s", what, iss.Identifier, v)
		return
	}
	if iss.CheckoutRunID != nil {
		w.m.mu.Lock()
		ag := w.m.runAgent[*iss.CheckoutRunID]
		w.m.mu.Unlock()
		if ag != deref(iss.AssigneeAgentID) {
			w.fail("%s: %s locked by run %s of agent %s but assigned to %q", what, iss.Identifier, short(*iss.CheckoutRunID), short(ag), short(deref(iss.AssigneeAgentID)))
		}
	}
	if iss.CheckoutEpoch < w.maxEpoch[iss.ID] {
		w.fail("%s: epoch of %s went down from %d to %d", what, iss.Identifier, w.maxEpoch[iss.ID], iss.CheckoutEpoch)
	}
	w.maxEpoch[iss.ID] = max(w.maxEpoch[iss.ID], iss.CheckoutEpoch)
}

// observe reads every issue and checks it.
func (w *propWorker) observe() {
	for _, id := range w.m.issues {
		iss, err := w.m.st.IssueGet(w.m.t.Context(), "", id)
		if err != nil {
			w.fail("get %s: %v", short(id), err)
			return
		}
		w.seen(iss, "observation")
	}
}

// noLockNames checks that no issue's lock names run runID.
func (w *propWorker) noLockNames(runID, when string) {
	for _, id := range w.m.issues {
		iss, err := w.m.st.IssueGet(w.m.t.Context(), "", id)
		if err != nil {
			w.fail("get %s: %v", short(id), err)
			return
		}
		if deref(iss.CheckoutRunID) == runID || deref(iss.ExecutionRunID) == runID {
			w.fail("%s still locked by run %s %s (L6 / sweeper pass 2): %+v", iss.Identifier, short(runID), when, lockOf(iss))
		}
	}
}

// final ends every run, sweeps, and checks the end state and the activity log.
func (m *propModel) final(t *testing.T) {
	ctx := t.Context()
	m.mu.Lock()
	var runs []string
	for id := range m.runAgent {
		runs = append(runs, id)
	}
	m.mu.Unlock()
	// A run live now was live at every earlier moment (a dead run never
	// comes back), so an adoption that displaced it displaced a live holder.
	now := time.Now()
	for _, a := range allActivity(t, m.st, store.ActivityListParams{CompanyID: m.co.ID, Action: clasp.ActionIssueLockAdopted}) {
		prev := asString(details(t, a)["previousCheckoutRunId"])
		if prev == "" {
			continue
		}
		if r, err := m.st.RunGet(ctx, prev); err == nil && r.Live(now) {
			t.Errorf("issue %s: run %s adopted the lock of run %s, which is still live (L1/L3: only dead holders are adopted)", short(a.EntityID), short(deref(a.RunID)), short(prev))
		}
	}
	for _, id := range runs {
		_, err := m.st.RunFinish(ctx, &store.RunFinishParams{RunID: id, Status: clasp.RunCancelled, Actor: boardActor()})
		if code := clasp.ErrorCode(err); code != "" && code != clasp.CodeRunNotLive {
			t.Fatalf("final finish of %s: %v", id, err)
		}
	}
	if _, err := sweepOnce(ctx, m.st); err != nil {
		t.Fatalf("final sweep: %v", err)
	}
	if res, err := sweepOnce(ctx, m.st); err != nil || res != (store.SweepResult{}) {
		t.Errorf("second final sweep: got %+v, %v, want nothing to do", res, err)
	}

	for _, id := range m.issues {
		iss := getIssue(t, m.st, id)
		checkL7(t, "end", iss)
		if iss.CheckoutRunID != nil || iss.ExecutionRunID != nil {
			t.Errorf("%s: lock left after every run ended: %+v", iss.Identifier, lockOf(iss))
		}
		var epochs []int64
		runOfEpoch := map[int64]string{}
		counts := map[string]int{}
		for _, a := range allActivity(t, m.st, store.ActivityListParams{CompanyID: m.co.ID, EntityID: id}) {
			d := details(t, a)
			switch a.Action {
			case clasp.ActionIssueCheckedOut:
				if asString(d["runId"]) == "" {
					continue // a board checkout takes no lock
				}
				e, _ := strconv.ParseInt(asString(d["checkoutEpoch"]), 10, 64)
				epochs = append(epochs, e)
				runOfEpoch[e] = asString(d["runId"])
			case clasp.ActionIssueEscalated:
				// An escalation (E3) clears the checkout lock its issue had.
				if asString(d["previousCheckoutRunId"]) == "" {
					continue
				}
			case clasp.ActionIssueForceRelease, clasp.ActionIssueLockAdopted:
				if why := asString(d["why"]); a.Action == clasp.ActionIssueLockAdopted && why != "terminal" && why != "lost" && why != "missing" {
					t.Errorf("%s: adoption %s of a holder that was not dead (why %q, want terminal, lost or missing, L3)", iss.Identifier, a.Details, why)
				}
				if asString(d["previousCheckoutRunId"]) == "" {
					continue // no checkout lock was cleared
				}
			}
			counts[a.Action]++
		}
		sort.Slice(epochs, func(i, j int) bool { return epochs[i] < epochs[j] })
		want := make([]int64, iss.CheckoutEpoch)
		for i := range want {
			want[i] = int64(i + 1)
		}
		if diff := cmp.Diff(want, epochs, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: epoch %d, issue.checked_out epochs %v, want 1..%d once each (every acquisition has one row)", iss.Identifier, iss.CheckoutEpoch, epochs, iss.CheckoutEpoch)
		}
		m.mu.Lock()
		for k, run := range m.acquired {
			if k.issue == id && runOfEpoch[k.epoch] != run {
				t.Errorf("%s: epoch %d was acquired by run %s, its issue.checked_out row names %q", iss.Identifier, k.epoch, short(run), short(runOfEpoch[k.epoch]))
			}
		}
		m.mu.Unlock()
		clears := counts[clasp.ActionIssueReleased] + counts[clasp.ActionIssueLockReleased] + counts[clasp.ActionIssueStaleLockCleared] +
			counts[clasp.ActionIssueForceRelease] + counts[clasp.ActionIssueLockAdopted] + counts[clasp.ActionIssueEscalated]
		if int64(clears) != iss.CheckoutEpoch {
			t.Errorf("%s: %d lock clears %v for %d acquisitions, want one clear row per acquisition (every lock ends unlocked)", iss.Identifier, clears, counts, iss.CheckoutEpoch)
		}
		t.Logf("%s: epoch %d, lock activity %v", iss.Identifier, iss.CheckoutEpoch, counts)
	}
}

// short abbreviates an id to its last 8 characters (time-ordered UUIDs
// share their first ones).
func short(id string) string {
	if len(id) > 8 {
		return id[len(id)-8:]
	}
	return id
}

func idOf(r *clasp.Run) string {
	if r == nil {
		return "-"
	}
	return r.ID
}

func actorName(a store.Actor) string {
	if a.IsBoard() {
		return "board"
	}
	return short(a.AgentID) + "/" + short(a.RunID)
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return clasp.ErrorCode(err)
}

func result(iss *clasp.Issue, err error) string {
	if err != nil {
		if e := clasp.AsError(err); e != nil && e.Details != nil {
			return fmt.Sprintf("%s %v", e.Code, e.Details["reason"])
		}
		return clasp.ErrorCode(err)
	}
	l := lockOf(iss)
	return fmt.Sprintf("ok %s assignee=%s lock=%s/%s epoch=%d", l.Status, short(l.Assignee), short(l.CheckoutRun), short(l.ExecutionRun), l.Epoch)
}

func patchDesc(p *store.IssueUpdateParams) string {
	var parts []string
	if p.Status != nil {
		parts = append(parts, "status="+string(*p.Status))
	}
	if p.AssigneeAgentID != nil {
		parts = append(parts, "assignee="+short(*p.AssigneeAgentID))
	}
	if p.Title != nil {
		parts = append(parts, "title")
	}
	return "{" + strings.Join(parts, " ") + "}"
}
