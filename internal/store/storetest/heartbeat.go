package storetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// RunHeartbeat runs the contract tests of store.HeartbeatStore (the
// adapter configs, wake requests, server-managed runs, process loss) on
// stores made by open, which must implement it.
func RunHeartbeat(t *testing.T, open func(t *testing.T) (store.Store, Hooks)) {
	for _, tc := range append([]struct {
		name string
		fn   func(*testing.T, *hbEnv)
	}{
		{"HB_AdapterConfig", testHBAdapterConfig},
		{"HB_WakeCoalesceDeferPromote", testHBWakeCoalesceDeferPromote},
		{"HB_WakeIdempotencyConcurrent", testHBWakeIdempotency},
		{"HB_WakeSkippedWithoutAdapter", testHBWakeSkipped},
		{"HB_WakeRespectsOwnership", testHBWakeRespectsOwnership},
		{"HB_RunStartSlots", testHBRunStartSlots},
		{"HB_ProcessLostRetryOnce", testHBProcessLostRetryOnce},
		{"HB_ProcessLostRetryKnowsIssue", testHBProcessLostRetryKnowsIssue},
		{"HB_ProcessLostOtherHost", testHBProcessLostOtherHost},
		{"HB_PromoteAfterLeaseExpired", testHBPromoteAfterLeaseExpired},
		{"HB_PauseCancelsQueued", testHBPauseCancelsQueued},
		{"HB_InstanceTakeOver", testHBInstanceTakeOver},
	}, depWakeTests...) { // RULES.md, D8 (depwake.go)
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, open)
			hs, ok := e.st.(store.HeartbeatStore)
			if !ok {
				t.Fatalf("store %T does not implement store.HeartbeatStore", e.st)
			}
			he := &hbEnv{env: e, hs: hs}
			for _, a := range []*clasp.Agent{e.a, e.b} {
				he.setAdapter(t, a, 1)
			}
			tc.fn(t, he)
		})
	}
}

const hbHost = "host-1"

type hbEnv struct {
	*env
	hs store.HeartbeatStore
}

func (e *hbEnv) setAdapter(t *testing.T, a *clasp.Agent, maxRuns int) {
	t.Helper()
	_, err := e.hs.AgentAdapterSet(t.Context(), &store.AgentAdapterSetParams{AgentID: a.ID, Actor: boardActor(),
		Config: &clasp.AdapterConfig{Type: clasp.AdapterProcess, Command: "/bin/true",
			Heartbeat: clasp.HeartbeatConfig{Enabled: true, MaxConcurrentRuns: maxRuns}}})
	if err != nil {
		t.Fatalf("setup: set adapter of %s: %v", a.Name, err)
	}
}

func (e *hbEnv) wake(t *testing.T, a *clasp.Agent, issueID, key string) *store.WakeResult {
	t.Helper()
	res, err := e.hs.Wake(t.Context(), &store.WakeParams{AgentID: a.ID, Reason: clasp.InvocationOnDemand, IssueID: issueID,
		IdempotencyKey: key, Actor: boardActor()})
	if err != nil {
		t.Fatalf("wake %s for issue %q: %v", a.Name, issueID, err)
	}
	return res
}

func (e *hbEnv) start(t *testing.T, r *clasp.Run) *clasp.Run {
	t.Helper()
	got, err := e.hs.RunStart(t.Context(), &store.RunStartParams{RunID: r.ID, HostID: hbHost, TokenHash: newTokenHash(),
		LeaseTTL: leaseTTL, MaxRunning: 1})
	if err != nil {
		t.Fatalf("start run %s: %v", r.ID, err)
	}
	if got.Status != clasp.RunRunning || deref(got.HostID) != hbHost {
		t.Fatalf("start run %s: got status %s host %q, want running on %s", r.ID, got.Status, deref(got.HostID), hbHost)
	}
	return got
}

func wantOutcome(t *testing.T, what string, res *store.WakeResult, want string) {
	t.Helper()
	if res.Outcome != want {
		t.Fatalf("%s: got outcome %q, want %q", what, res.Outcome, want)
	}
}

func testHBAdapterConfig(t *testing.T, e *hbEnv) {
	ctx := t.Context()
	for _, bad := range []struct {
		cfg   clasp.AdapterConfig
		field string
	}{
		{clasp.AdapterConfig{Type: "http", Command: "x"}, "type"},
		{clasp.AdapterConfig{Type: "", Command: "x"}, "type"},
		{clasp.AdapterConfig{Type: "process"}, "command"},
		{clasp.AdapterConfig{Type: "process", Command: "x", TimeoutSec: -1}, "timeoutSec"},
		{clasp.AdapterConfig{Type: "process", Command: "x", Heartbeat: clasp.HeartbeatConfig{MaxConcurrentRuns: 1000}}, "heartbeat.maxConcurrentRuns"},
	} {
		_, err := e.hs.AgentAdapterSet(ctx, &store.AgentAdapterSetParams{AgentID: e.a.ID, Config: &bad.cfg, Actor: boardActor()})
		wantCode(t, "invalid adapter", err, clasp.CodeInvalidRequest)
		if ce := clasp.AsError(err); ce == nil || ce.Details["field"] != bad.field {
			t.Errorf("invalid adapter %+v: got error %v, want details.field %q", bad.cfg, err, bad.field)
		}
	}
	cfg, err := e.hs.AgentAdapterGet(ctx, e.a.ID)
	if err != nil || cfg == nil || cfg.Command != "/bin/true" || cfg.Heartbeat.MaxConcurrentRuns != 1 {
		t.Fatalf("get adapter: got %+v, %v; want the one set", cfg, err)
	}
	list, err := e.hs.AgentAdapterList(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("list adapters: got %d, %v; want 2", len(list), err)
	}
	if _, err := e.hs.AgentAdapterSet(ctx, &store.AgentAdapterSetParams{AgentID: e.a.ID, Actor: boardActor()}); err != nil {
		t.Fatalf("remove adapter: %v", err)
	}
	if cfg, err := e.hs.AgentAdapterGet(ctx, e.a.ID); err != nil || cfg != nil {
		t.Errorf("get removed adapter: got %+v, %v; want nil, nil", cfg, err)
	}
	_, err = e.hs.AgentAdapterGet(ctx, "00000000-0000-0000-0000-000000000000")
	wantCode(t, "adapter of missing agent", err, clasp.CodeNotFound)
}

func testHBWakeCoalesceDeferPromote(t *testing.T, e *hbEnv) {
	ctx := t.Context()
	iss := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	w1 := e.wake(t, e.a, iss.ID, "")
	wantOutcome(t, "first wake of A", w1, store.WakeQueued)
	ra := w1.Run
	if ra.Status != clasp.RunQueued || deref(ra.IssueID) != iss.ID || ra.Attempt != 1 {
		t.Fatalf("queued run: got %+v", ra)
	}
	if got := getIssue(t, e.st, iss.ID); deref(got.ExecutionRunID) != ra.ID || got.CheckoutRunID != nil {
		t.Fatalf("issue after wake: execution %q checkout %v, want execution %s and no checkout", deref(got.ExecutionRunID), got.CheckoutRunID, ra.ID)
	}
	w2 := e.wake(t, e.a, iss.ID, "")
	wantOutcome(t, "second wake of A", w2, store.WakeCoalesced)
	if w2.Run == nil || w2.Run.ID != ra.ID {
		t.Fatalf("coalesced wake: got run %v, want %s", w2.Run, ra.ID)
	}
	w3 := e.wake(t, e.b, iss.ID, "")
	wantOutcome(t, "wake of B", w3, store.WakeDeferred)
	if deref(w3.BlockedByRunID) != ra.ID || w3.Run != nil {
		t.Fatalf("deferred wake: blocked by %q run %v, want %s and no run", deref(w3.BlockedByRunID), w3.Run, ra.ID)
	}
	// A's run starts and finishes without taking the issue (it stays
	// unassigned): B's wake is promoted in the same transaction.
	ra = e.start(t, ra)
	// An exit code beyond 32 bits is refused by both stores, and the run
	// stays live (PostgreSQL's column is an integer; it must not wrap).
	huge := 1<<32 + 1
	_, err := e.st.RunFinish(ctx, &store.RunFinishParams{RunID: ra.ID, Status: clasp.RunFailed, ExitCode: &huge, Actor: store.Actor{Type: clasp.ActorSystem}})
	wantCode(t, "finish with a 33-bit exit code", err, clasp.CodeInvalidRequest)
	if _, err := e.st.RunFinish(ctx, &store.RunFinishParams{RunID: ra.ID, Status: clasp.RunSucceeded, Actor: store.Actor{Type: clasp.ActorSystem}}); err != nil {
		t.Fatalf("finish A's run: %v", err)
	}
	runs, _, err := e.st.RunList(ctx, &store.RunListParams{CompanyID: e.co.ID, AgentID: e.b.ID, Statuses: []clasp.RunStatus{clasp.RunQueued}})
	if err != nil || len(runs) != 1 {
		t.Fatalf("queued runs of B after promotion: got %d, %v; want 1", len(runs), err)
	}
	got := getIssue(t, e.st, iss.ID)
	if deref(got.ExecutionRunID) != runs[0].ID || got.CheckoutRunID != nil {
		t.Errorf("issue after promotion: execution %q checkout %v, want execution %s (B's run), no checkout",
			deref(got.ExecutionRunID), got.CheckoutRunID, runs[0].ID)
	}
	checkL7(t, "after promotion", got)
	if n := len(e.issueActivity(t, iss.ID, clasp.ActionIssueExecutionLocked)); n != 2 {
		t.Errorf("issue.execution_locked rows: got %d, want 2", n)
	}
	// B's run starts and may check the issue out.
	rb := e.start(t, runs[0])
	if got := mustCheckout(t, e.st, rb, iss.ID, clasp.IssueTodo); deref(got.AssigneeAgentID) != e.b.ID {
		t.Errorf("checkout by B's promoted run: assignee %q, want B", deref(got.AssigneeAgentID))
	}
}

// testHBWakeRespectsOwnership: a wake takes an issue's execution lock, so
// an agent is woken only for an issue it may check out (its own or
// unassigned, not done or cancelled), whoever asks (the agent itself or
// the board). A refused wake writes nothing: no run, no lock, no wake row,
// no activity; its key may be used again. A deferred wake whose issue
// became another agent's while it waited is skipped, not promoted.
func testHBWakeRespectsOwnership(t *testing.T, e *hbEnv) {
	ctx := t.Context()
	bIssue := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, e.b.ID)
	done := newIssue(t, e.st, e.co.ID, clasp.IssueDone, "")
	cancelled := newIssue(t, e.st, e.co.ID, clasp.IssueCancelled, e.a.ID)
	before := len(allActivity(t, e.st, store.ActivityListParams{CompanyID: e.co.ID}))
	for _, actor := range []store.Actor{agentActor(e.a), boardActor()} {
		for _, key := range []string{"", "k-" + string(actor.Type)} {
			what := fmt.Sprintf("wake of A by %s (key %q) for B's issue", actor.Type, key)
			_, err := e.hs.Wake(ctx, &store.WakeParams{AgentID: e.a.ID, Reason: clasp.InvocationOnDemand, IssueID: bIssue.ID,
				IdempotencyKey: key, Actor: actor})
			wantConflict(t, what, err, map[string]string{"issueId": bIssue.ID, "status": "todo", "assigneeAgentId": e.b.ID,
				"checkoutRunId": "", "executionRunId": "", "reason": clasp.ReasonAssignedToOtherAgent})
			for _, closed := range []*clasp.Issue{done, cancelled} {
				what := fmt.Sprintf("wake of A by %s (key %q) for a %s issue", actor.Type, key, closed.Status)
				_, err := e.hs.Wake(ctx, &store.WakeParams{AgentID: e.a.ID, Reason: clasp.InvocationOnDemand, IssueID: closed.Identifier,
					IdempotencyKey: key, Actor: actor})
				wantCode(t, what, err, clasp.CodePreconditionFailed)
				if ce := clasp.AsError(err); ce == nil || ce.Details["reason"] != store.WakeReasonIssueClosed || asString(ce.Details["issueId"]) != closed.ID {
					t.Errorf("%s: got %v, want details reason %q and the issue's id", what, err, store.WakeReasonIssueClosed)
				}
			}
		}
	}
	for _, iss := range []*clasp.Issue{bIssue, done, cancelled} {
		if got := getIssue(t, e.st, iss.ID); got.ExecutionRunID != nil || got.CheckoutRunID != nil || got.Status != iss.Status {
			t.Errorf("issue %s (%s) after refused wakes: %+v, want unchanged and unlocked", iss.Identifier, iss.Status, lockOf(got))
		}
	}
	if runs, _, err := e.st.RunList(ctx, &store.RunListParams{CompanyID: e.co.ID}); err != nil || len(runs) != 0 {
		t.Errorf("runs after refused wakes: got %d, %v; want 0", len(runs), err)
	}
	if after := len(allActivity(t, e.st, store.ActivityListParams{CompanyID: e.co.ID})); after != before {
		t.Errorf("activity rows after refused wakes: got %d more, want none", after-before)
	}
	// The key of a refused wake is free: a wake of A with it (no issue) queues a run.
	wantOutcome(t, "wake of A with a refused wake's key", e.wake(t, e.a, "", "k-agent"), store.WakeQueued)
	// The assignee, and any agent for an unassigned issue, may be woken.
	wantOutcome(t, "wake of B for its issue", e.wake(t, e.b, bIssue.ID, ""), store.WakeQueued)
	own := newIssue(t, e.st, e.co.ID, clasp.IssueBacklog, e.a.ID)
	wantOutcome(t, "wake of A for its backlog issue", e.wake(t, e.a, own.ID, ""), store.WakeQueued)

	// A deferred wake of B for an unassigned issue; A's run takes the issue
	// and finishes: B's wake is skipped, not given A's issue's lock.
	free := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	ra := e.wake(t, e.a, free.ID, "").Run
	wantOutcome(t, "wake of B for an issue A's run holds", e.wake(t, e.b, free.ID, ""), store.WakeDeferred)
	ra = e.start(t, ra)
	mustCheckout(t, e.st, ra, free.ID, clasp.IssueTodo)
	if _, err := e.st.RunFinish(ctx, &store.RunFinishParams{RunID: ra.ID, Status: clasp.RunSucceeded, Actor: store.Actor{Type: clasp.ActorSystem}}); err != nil {
		t.Fatalf("finish A's run: %v", err)
	}
	got := getIssue(t, e.st, free.ID)
	if got.ExecutionRunID != nil || got.CheckoutRunID != nil || deref(got.AssigneeAgentID) != e.a.ID {
		t.Errorf("A's issue after its run ended: %+v, assignee %q; want unlocked, A's", lockOf(got), deref(got.AssigneeAgentID))
	}
	bRuns, _, err := e.st.RunList(ctx, &store.RunListParams{CompanyID: e.co.ID, AgentID: e.b.ID})
	if err != nil || len(bRuns) != 1 || deref(bRuns[0].IssueID) != bIssue.ID {
		t.Errorf("B's runs after A's run ended: got %d, %v; want only the one for B's own issue", len(bRuns), err)
	}
}

func testHBWakeIdempotency(t *testing.T, e *hbEnv) {
	iss := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	var mu sync.Mutex
	ids := map[string]bool{}
	runs := map[string]bool{}
	race(8, func(i int) {
		res, err := e.hs.Wake(t.Context(), &store.WakeParams{AgentID: e.a.ID, Reason: clasp.InvocationOnDemand,
			IssueID: iss.ID, IdempotencyKey: "same-key", Actor: boardActor()})
		if err != nil {
			t.Errorf("concurrent wake %d: %v", i, err)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		ids[res.WakeID] = true
		if res.Run != nil {
			runs[res.Run.ID] = true
		}
	})
	if len(ids) != 1 || len(runs) != 1 {
		t.Errorf("8 concurrent wakes with one key: got %d wakes and %d runs, want 1 and 1", len(ids), len(runs))
	}
	all, _, err := e.st.RunList(t.Context(), &store.RunListParams{CompanyID: e.co.ID})
	if err != nil || len(all) != 1 {
		t.Errorf("runs after concurrent wakes: got %d, %v; want 1", len(all), err)
	}
	again := e.wake(t, e.a, iss.ID, "same-key")
	if !again.Replayed {
		t.Errorf("repeat of the key: got Replayed false, want true")
	}
	// The key reused with a different request (another issue, another
	// reason) is refused, not answered with the first wake.
	other := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	_, err = e.hs.Wake(t.Context(), &store.WakeParams{AgentID: e.a.ID, Reason: clasp.InvocationOnDemand,
		IssueID: other.ID, IdempotencyKey: "same-key", Actor: boardActor()})
	wantCode(t, "same key, other issue", err, clasp.CodeIdempotencyKeyReused)
	_, err = e.hs.Wake(t.Context(), &store.WakeParams{AgentID: e.a.ID, Reason: clasp.InvocationTimer,
		IssueID: iss.ID, IdempotencyKey: "same-key", Actor: boardActor()})
	wantCode(t, "same key, other reason", err, clasp.CodeIdempotencyKeyReused)
}

func testHBWakeSkipped(t *testing.T, e *hbEnv) {
	c := newAgent(t, e.st, e.co.ID, "gamma")
	res := e.wake(t, c, "", "")
	wantOutcome(t, "wake of an agent without adapter", res, store.WakeSkipped)
	paused := clasp.AgentPaused
	if _, err := e.st.AgentUpdate(t.Context(), &store.AgentUpdateParams{AgentID: e.a.ID, Status: &paused, Actor: boardActor()}); err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, "wake of a paused agent", e.wake(t, e.a, "", ""), store.WakeSkipped)
	_, err := e.hs.Wake(t.Context(), &store.WakeParams{AgentID: e.b.ID, Reason: "whenever", Actor: boardActor()})
	wantCode(t, "bad reason", err, clasp.CodeInvalidRequest)
	// Without issue: one queued run per agent, further wakes coalesce.
	wantOutcome(t, "wake of B", e.wake(t, e.b, "", ""), store.WakeQueued)
	wantOutcome(t, "second wake of B", e.wake(t, e.b, "", ""), store.WakeCoalesced)
}

func testHBRunStartSlots(t *testing.T, e *hbEnv) {
	i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	i2 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	r1 := e.wake(t, e.a, i1.ID, "").Run
	r2 := e.wake(t, e.a, i2.ID, "").Run
	e.start(t, r1)
	_, err := e.hs.RunStart(t.Context(), &store.RunStartParams{RunID: r2.ID, HostID: hbHost, LeaseTTL: leaseTTL, MaxRunning: 1})
	wantCode(t, "second run with one slot", err, clasp.CodePreconditionFailed)
	_, err = e.hs.RunStart(t.Context(), &store.RunStartParams{RunID: r1.ID, HostID: hbHost, LeaseTTL: leaseTTL, MaxRunning: 1})
	wantCode(t, "starting a running run", err, clasp.CodeRunNotLive)
	if _, err := e.hs.RunStart(t.Context(), &store.RunStartParams{RunID: r2.ID, HostID: hbHost, LeaseTTL: leaseTTL, MaxRunning: 2}); err != nil {
		t.Errorf("second run with two slots: %v", err)
	}
	if err := e.hs.RunSetProcess(t.Context(), r1.ID, hbHost, 4242, 777); err != nil {
		t.Fatalf("set process: %v", err)
	}
	on, err := e.hs.RunRunningOnHost(t.Context(), hbHost)
	if err != nil || len(on) != 2 {
		t.Fatalf("running on host: got %d, %v; want 2", len(on), err)
	}
	for _, m := range on {
		if m.Run.ID == r1.ID && (deref(m.Run.PID) != 4242 || m.ProcStart != 777) {
			t.Errorf("run %s: got pid %d start %d, want 4242 777", r1.ID, deref(m.Run.PID), m.ProcStart)
		}
	}
	if err := e.hs.RunRenew(t.Context(), r1.ID, "other-host", leaseTTL); clasp.ErrorCode(err) != clasp.CodeRunNotLive {
		t.Errorf("renew from another host: got %v, want run_not_live", err)
	}
	if err := e.hs.RunRenew(t.Context(), r1.ID, hbHost, leaseTTL); err != nil {
		t.Errorf("renew: %v", err)
	}
}

// testHBProcessLostRetryOnce is the process-loss retry (RULES.md): the lost run's checkout lock is
// cleared while its execution lock moves to the one retry, in one
// statement; a second loss is not retried and releases the locks.
func testHBProcessLostRetryOnce(t *testing.T, e *hbEnv) {
	ctx := t.Context()
	iss := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, e.a.ID)
	r1 := e.start(t, e.wake(t, e.a, iss.ID, "").Run)
	mustCheckout(t, e.st, r1, iss.ID, clasp.IssueTodo)
	// Another wake of A waits for A's run.
	deferred := e.wake(t, e.a, iss.ID, "")
	wantOutcome(t, "second wake of A", deferred, store.WakeDeferred)

	failed, retry, err := e.hs.RunProcessLost(ctx, &store.RunProcessLostParams{RunID: r1.ID, HostID: hbHost})
	if err != nil {
		t.Fatalf("process lost: %v", err)
	}
	if failed.Status != clasp.RunFailed || deref(failed.ErrorCode) != clasp.RunErrorProcessLost {
		t.Errorf("lost run: got %s/%s, want failed/process_lost", failed.Status, deref(failed.ErrorCode))
	}
	if retry == nil || retry.Status != clasp.RunQueued || retry.Attempt != 2 || deref(retry.RetryOfRunID) != r1.ID ||
		deref(retry.IssueID) != iss.ID || retry.InvocationSource != clasp.InvocationRetry {
		t.Fatalf("retry: got %+v, want queued attempt 2 retrying %s on the issue", retry, r1.ID)
	}
	got := getIssue(t, e.st, iss.ID)
	if deref(got.ExecutionRunID) != retry.ID || got.CheckoutRunID != nil {
		t.Fatalf("issue after loss: execution %q checkout %q, want execution %s and no checkout (process-loss retry)",
			deref(got.ExecutionRunID), deref(got.CheckoutRunID), retry.ID)
	}
	checkL7(t, "after loss", got)
	// The loss is recorded once, as run.lost, as the sweeper records a
	// lease that ran out; no run.finished follows it.
	for action, want := range map[string]int{clasp.ActionRunLost: 1, clasp.ActionRunFinished: 0} {
		if n := len(allActivity(t, e.st, store.ActivityListParams{CompanyID: e.co.ID, EntityID: r1.ID, Action: action})); n != want {
			t.Errorf("%s rows of the lost run: %d, want %d", action, n, want)
		}
	}
	if _, _, err := e.hs.RunProcessLost(ctx, &store.RunProcessLostParams{RunID: r1.ID, HostID: hbHost}); clasp.ErrorCode(err) != clasp.CodeRunNotLive {
		t.Errorf("second report of the same loss: got %v, want run_not_live", err)
	}
	// The deferred wake waits for the retry now.
	if runs, _, _ := e.st.RunList(ctx, &store.RunListParams{CompanyID: e.co.ID, AgentID: e.a.ID}); len(runs) != 2 {
		t.Errorf("runs of A while the retry holds the issue: got %d, want 2 (the lost run and its retry)", len(runs))
	}
	// The retry resumes the issue (in_progress, A's) and is lost too: no second retry, locks released.
	r2 := e.start(t, retry)
	if iss2 := mustCheckout(t, e.st, r2, iss.ID, clasp.IssueTodo); deref(iss2.CheckoutRunID) != r2.ID {
		t.Fatalf("retry checkout: got checkout %q, want %s", deref(iss2.CheckoutRunID), r2.ID)
	}
	_, retry2, err := e.hs.RunProcessLost(ctx, &store.RunProcessLostParams{RunID: r2.ID, HostID: hbHost})
	if err != nil || retry2 != nil {
		t.Fatalf("second loss: got retry %v, %v; want none", retry2, err)
	}
	got = getIssue(t, e.st, iss.ID)
	if got.CheckoutRunID != nil && deref(got.CheckoutRunID) == r2.ID || deref(got.ExecutionRunID) == r2.ID {
		t.Errorf("issue after second loss: still names %s: %+v", r2.ID, lockOf(got))
	}
	// A's deferred wake was coalesced into the retry when the first run
	// was lost, so nothing more runs: the issue is free.
	if got.ExecutionRunID != nil || got.CheckoutRunID != nil {
		t.Errorf("issue after second loss: %+v, want no lock", lockOf(got))
	}
	all, _, _ := e.st.RunList(ctx, &store.RunListParams{CompanyID: e.co.ID, AgentID: e.a.ID})
	if len(all) != 2 {
		t.Errorf("runs of A: got %d, want 2 (the run and its one retry, into which the deferred wake coalesced)", len(all))
	}
	// B, not the assignee, may not be woken for A's issue at all.
	_, err = e.hs.Wake(ctx, &store.WakeParams{AgentID: e.b.ID, Reason: clasp.InvocationOnDemand, IssueID: iss.ID, Actor: boardActor()})
	wantCode(t, "wake of B for A's issue", err, clasp.CodeCheckoutConflict)
}

// testHBProcessLostRetryKnowsIssue: a run woken without an issue that
// checked one out is lost; its retry's issueId is that issue, whose
// execution lock it received, and a second issue it had locked is
// released (L6), not handed over.
func testHBProcessLostRetryKnowsIssue(t *testing.T, e *hbEnv) {
	ctx := t.Context()
	first := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, e.a.ID)
	second := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, e.a.ID)
	r1 := e.start(t, e.wake(t, e.a, "", "").Run)
	if r1.IssueID != nil {
		t.Fatalf("run woken without issue: got issueId %q", *r1.IssueID)
	}
	mustCheckout(t, e.st, r1, first.ID, clasp.IssueTodo)
	mustCheckout(t, e.st, r1, second.ID, clasp.IssueTodo)
	_, retry, err := e.hs.RunProcessLost(ctx, &store.RunProcessLostParams{RunID: r1.ID, HostID: hbHost})
	if err != nil || retry == nil {
		t.Fatalf("process lost: retry %v, %v; want a retry", retry, err)
	}
	if deref(retry.IssueID) != second.ID {
		t.Fatalf("retry's issueId: got %q, want %s (the issue whose execution lock it received)", deref(retry.IssueID), second.ID)
	}
	if got := getIssue(t, e.st, second.ID); deref(got.ExecutionRunID) != retry.ID || got.CheckoutRunID != nil {
		t.Errorf("issue handed over: %+v, want execution lock %s and no checkout lock", lockOf(got), retry.ID)
	}
	if got := getIssue(t, e.st, first.ID); got.ExecutionRunID != nil || got.CheckoutRunID != nil {
		t.Errorf("other issue of the lost run: %+v, want its locks released", lockOf(got))
	}
	stored := getRun(t, e.st, retry.ID)
	if deref(stored.IssueID) != second.ID {
		t.Errorf("stored retry's issueId: got %q, want %s", deref(stored.IssueID), second.ID)
	}
}

func testHBProcessLostOtherHost(t *testing.T, e *hbEnv) {
	r := e.start(t, e.wake(t, e.a, "", "").Run)
	_, _, err := e.hs.RunProcessLost(t.Context(), &store.RunProcessLostParams{RunID: r.ID, HostID: "other"})
	wantCode(t, "loss reported by another host", err, clasp.CodeRunNotLive)
	if got := getRun(t, e.st, r.ID); got.Status != clasp.RunRunning {
		t.Errorf("run of another host: got %s, want running", got.Status)
	}
}

func testHBPromoteAfterLeaseExpired(t *testing.T, e *hbEnv) {
	iss := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	ra := e.start(t, e.wake(t, e.a, iss.ID, "").Run)
	wantOutcome(t, "wake of B", e.wake(t, e.b, iss.ID, ""), store.WakeDeferred)
	if n, err := e.hs.WakePromoteDeferred(t.Context()); err != nil || n != 0 {
		t.Fatalf("promote while A's run lives: got %d, %v; want 0", n, err)
	}
	if err := e.h.ExpireRunLease(t.Context(), ra.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := e.hs.WakePromoteDeferred(t.Context()); err != nil || n != 1 {
		t.Fatalf("promote after A's lease expired: got %d, %v; want 1", n, err)
	}
	got := getIssue(t, e.st, iss.ID)
	runs, _, _ := e.st.RunList(t.Context(), &store.RunListParams{CompanyID: e.co.ID, AgentID: e.b.ID})
	if len(runs) != 1 || deref(got.ExecutionRunID) != runs[0].ID {
		t.Errorf("after promotion: B's runs %d, execution %q; want B's run holding it", len(runs), deref(got.ExecutionRunID))
	}
	if n, err := e.hs.WakePromoteDeferred(t.Context()); err != nil || n != 0 {
		t.Errorf("second promotion pass: got %d, %v; want 0", n, err)
	}
}

func testHBPauseCancelsQueued(t *testing.T, e *hbEnv) {
	iss := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	r := e.wake(t, e.a, iss.ID, "").Run
	wantOutcome(t, "wake of B", e.wake(t, e.b, iss.ID, ""), store.WakeDeferred)
	n, err := e.hs.AgentCancelQueuedRuns(t.Context(), e.a.ID, boardActor())
	if err != nil || n != 1 {
		t.Fatalf("cancel queued runs: got %d, %v; want 1", n, err)
	}
	if got := getRun(t, e.st, r.ID); got.Status != clasp.RunCancelled {
		t.Errorf("queued run after pause: got %s, want cancelled", got.Status)
	}
	got := getIssue(t, e.st, iss.ID)
	if deref(got.ExecutionRunID) == r.ID {
		t.Errorf("issue still names the cancelled run")
	}
	runs, _, _ := e.st.RunList(t.Context(), &store.RunListParams{CompanyID: e.co.ID, AgentID: e.b.ID})
	if len(runs) != 1 {
		t.Errorf("B's wake after A's run was cancelled: got %d runs, want 1 (promoted)", len(runs))
	}
}

// testHBInstanceTakeOver: instances of one machine; a take-over of an
// instance moves its running runs to the taker, returns its runs with a
// process (running and ended), happens once, and the taken instance's
// renewal answers not_found.
func testHBInstanceTakeOver(t *testing.T, e *hbEnv) {
	ctx := t.Context()
	machine := "machine-" + e.co.ID
	dead := &store.Instance{ID: hbHost, Host: machine, PID: 11, ProcStart: 22}
	taker := &store.Instance{ID: "host-2", Host: machine, PID: 33, ProcStart: 44}
	for _, in := range []*store.Instance{dead, taker} {
		if err := e.hs.InstanceRegister(ctx, in, leaseTTL); err != nil {
			t.Fatalf("register %s: %v", in.ID, err)
		}
	}
	ins, err := e.hs.InstanceList(ctx, machine)
	if err != nil || len(ins) != 2 {
		t.Fatalf("list: got %d, %v; want 2", len(ins), err)
	}
	for _, in := range ins {
		if in.Expired || in.Host != machine || (in.ID == hbHost && (in.PID != 11 || in.ProcStart != 22)) {
			t.Errorf("listed instance %+v: want live, on %s, with its pid and start", in, machine)
		}
	}
	running := e.start(t, e.wake(t, e.a, "", "").Run)
	ended := e.start(t, e.wake(t, e.b, "", "").Run)
	for _, r := range []*clasp.Run{running, ended} {
		if err := e.hs.RunSetProcess(ctx, r.ID, hbHost, 4242, 777); err != nil {
			t.Fatalf("set process: %v", err)
		}
	}
	if _, err := e.st.RunFinish(ctx, &store.RunFinishParams{RunID: ended.ID, Status: clasp.RunCancelled, Actor: boardActor()}); err != nil {
		t.Fatalf("finish: %v", err)
	}
	if err := e.hs.InstanceRelease(ctx, hbHost); err != nil {
		t.Fatalf("release: %v", err)
	}
	ins, _ = e.hs.InstanceList(ctx, machine)
	var d *store.Instance
	for _, in := range ins {
		if in.ID == hbHost {
			d = in
		}
	}
	if d == nil || !d.Expired {
		t.Fatalf("released instance: got %+v, want listed and expired", d)
	}
	runs, ok, err := e.hs.InstanceTakeOver(ctx, d, taker.ID)
	if err != nil || !ok || len(runs) != 2 {
		t.Fatalf("take over: got %d runs, %v, %v; want 2, true, nil", len(runs), ok, err)
	}
	if _, ok, err := e.hs.InstanceTakeOver(ctx, d, "host-3"); err != nil || ok {
		t.Errorf("second take-over of the same instance: got %v, %v; want false, nil", ok, err)
	}
	if got := getRun(t, e.st, running.ID); got.Status != clasp.RunRunning || deref(got.HostID) != taker.ID {
		t.Errorf("running run after the take-over: %s on %q, want running on %s", got.Status, deref(got.HostID), taker.ID)
	}
	if got := getRun(t, e.st, ended.ID); deref(got.HostID) != hbHost {
		t.Errorf("ended run after the take-over: on %q, want still %s", deref(got.HostID), hbHost)
	}
	if err := e.hs.RunRenew(ctx, running.ID, taker.ID, leaseTTL); err != nil {
		t.Errorf("taker renews the moved run: %v", err)
	}
	wantCode(t, "renewal of the taken-over instance", e.hs.InstanceRenew(ctx, hbHost, leaseTTL), clasp.CodeNotFound)
	if err := e.hs.InstanceRenew(ctx, taker.ID, leaseTTL); err != nil {
		t.Errorf("renewal of the taker: %v", err)
	}
}
