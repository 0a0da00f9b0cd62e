package httpapi

import (
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/clasp-dev/clasp"
	"github.com/google/go-cmp/cmp"
)

// The HTTP side of server-managed agents (adapter config,
// wakeups, run logs, run cancels) on the real handler over SQLite.

// fakeScheduler records what the API asks of the scheduler.
type fakeScheduler struct {
	mu       sync.Mutex
	nudges   int
	cancels  []string
	cancelOK bool // what Cancel answers
}

func (f *fakeScheduler) Nudge() { f.mu.Lock(); f.nudges++; f.mu.Unlock() }
func (f *fakeScheduler) Cancel(runID string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancels = append(f.cancels, runID)
	return f.cancelOK
}
func (f *fakeScheduler) counts() (int, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nudges, append([]string(nil), f.cancels...)
}

// writeRunLog writes run runID's log file as the scheduler would.
func writeRunLog(b *bundle, runID, text string) {
	b.t.Helper()
	if err := os.MkdirAll(b.logs, 0o700); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.logs, runID+".log"), []byte(text), 0o600); err != nil {
		b.t.Fatal(err)
	}
}

// processAdapter is a valid adapter body with heartbeats enabled.
func processAdapter() map[string]any {
	return map[string]any{"type": "process", "command": "/bin/true", "args": []string{"-x"}, "env": map[string]string{"A": "1"},
		"timeoutSec": 60, "heartbeat": map[string]any{"enabled": true, "intervalSec": 0}}
}

type agentWithAdapter struct {
	clasp.Agent
	Adapter *clasp.AdapterConfig `json:"adapter"`
}

func TestAgentAdapterPatch(t *testing.T) {
	b := setup(t)
	co := b.company("ADP")
	a, key := b.agent(co.ID, "alpha")
	path := "/api/agents/" + a.ID

	var got agentWithAdapter
	b.must(http.StatusOK, "PATCH", path, req{body: map[string]any{"adapter": processAdapter()}}, &got)
	want := &clasp.AdapterConfig{Type: "process", Command: "/bin/true", Args: []string{"-x"}, Env: map[string]string{"A": "1"}, TimeoutSec: 60,
		Heartbeat: clasp.HeartbeatConfig{Enabled: true, MaxConcurrentRuns: 1}}
	if diff := cmp.Diff(want, got.Adapter); diff != "" {
		t.Errorf("PATCH adapter answer (-want +got):\n%s", diff)
	}
	if got.ID != a.ID || got.Status != clasp.AgentActive {
		t.Errorf("PATCH answered agent %+v", got.Agent)
	}
	var again agentWithAdapter
	b.must(http.StatusOK, "GET", path, req{}, &again)
	if diff := cmp.Diff(want, again.Adapter); diff != "" {
		t.Errorf("GET adapter (-want +got):\n%s", diff)
	}

	bad := func(name string, mut func(m map[string]any), field string) {
		t.Helper()
		m := processAdapter()
		mut(m)
		wantErr(t, b.do("PATCH", path, req{body: map[string]any{"adapter": m}}), http.StatusBadRequest, clasp.CodeInvalidRequest, field)
	}
	bad("unknown type", func(m map[string]any) { m["type"] = "docker" }, "adapter.type")
	bad("no command", func(m map[string]any) { m["command"] = " " }, "adapter.command")
	bad("negative timeout", func(m map[string]any) { m["timeoutSec"] = -1 }, "adapter.timeoutSec")
	bad("too many runs", func(m map[string]any) { m["heartbeat"] = map[string]any{"maxConcurrentRuns": 1000} }, "adapter.heartbeat.maxConcurrentRuns")
	bad("unknown field", func(m map[string]any) { m["shell"] = true }, "adapter.shell")
	bad("bad env", func(m map[string]any) { m["env"] = map[string]string{"A=B": "1"} }, "adapter.env")
	wantErr(t, b.do("PATCH", path, req{body: map[string]any{"adapter": "sh"}}), http.StatusBadRequest, clasp.CodeInvalidRequest, "adapter")
	// A refused adapter changes nothing, not even the status sent with it.
	m := processAdapter()
	m["type"] = "ssh"
	wantErr(t, b.do("PATCH", path, req{body: map[string]any{"adapter": m, "status": "paused"}}), http.StatusBadRequest, clasp.CodeInvalidRequest, "adapter.type")
	b.must(http.StatusOK, "GET", path, req{}, &again)
	if again.Status != clasp.AgentActive || again.Adapter == nil || again.Adapter.Command != "/bin/true" {
		t.Errorf("after a refused PATCH: status %s adapter %+v", again.Status, again.Adapter)
	}

	// Agents never change any agent's configuration, not even their own.
	wantErr(t, b.do("PATCH", path, req{token: key, body: map[string]any{"adapter": nil}}), http.StatusForbidden, clasp.CodeForbidden, "")

	b.must(http.StatusOK, "PATCH", path, req{raw: []byte(`{"adapter": null}`)}, &got)
	if got.Adapter != nil {
		t.Errorf("adapter null left %+v", got.Adapter)
	}
	if n := countAction(b.companyActivityRows(co.ID), clasp.ActionAgentAdapterSet); n != 2 {
		t.Errorf("%d %s activity rows, want 2 (set, removed)", n, clasp.ActionAgentAdapterSet)
	}
}

// companyActivityRows returns a company's activity, oldest first.
func (b *bundle) companyActivityRows(companyID string) []*clasp.Activity {
	b.t.Helper()
	var rows []*clasp.Activity
	b.must(http.StatusOK, "GET", "/api/companies/"+companyID+"/activity?limit=1000", req{}, &rows)
	return rows
}

func TestPauseCancelsQueuedRuns(t *testing.T) {
	b := setup(t)
	co := b.company("PAU")
	a, _ := b.agent(co.ID, "alpha")
	b.must(http.StatusOK, "PATCH", "/api/agents/"+a.ID, req{body: map[string]any{"adapter": processAdapter()}}, nil)
	var w wakeOut
	b.must(http.StatusAccepted, "POST", "/api/agents/"+a.ID+"/wakeup", req{body: map[string]any{}}, &w)
	if w.Status != "queued" || w.RunID == nil {
		t.Fatalf("wake: %+v", w)
	}
	b.must(http.StatusOK, "PATCH", "/api/agents/"+a.ID, req{body: map[string]any{"status": "paused"}}, nil)
	var run clasp.Run
	b.must(http.StatusOK, "GET", "/api/runs/"+*w.RunID, req{}, &run)
	if run.Status != clasp.RunCancelled {
		t.Errorf("queued run of a paused agent is %s, want cancelled", run.Status)
	}
	// A paused agent's wake is skipped.
	b.must(http.StatusAccepted, "POST", "/api/agents/"+a.ID+"/wakeup", req{body: map[string]any{}}, &w)
	if w.Status != "skipped" || w.RunID != nil {
		t.Errorf("wake of a paused agent: %+v", w)
	}
}

func TestAgentWakeup(t *testing.T) {
	sched := &fakeScheduler{}
	b := setup(t, func(o *setupOpts) { o.scheduler = sched })
	co := b.company("WAK")
	a, keyA := b.agent(co.ID, "alpha")
	_, keyB := b.agent(co.ID, "beta")
	other := b.company("WAO")
	_, keyX := b.agent(other.ID, "xeno")
	b.must(http.StatusOK, "PATCH", "/api/agents/"+a.ID, req{body: map[string]any{"adapter": processAdapter()}}, nil)
	iss := b.issue(co.ID, map[string]any{"status": "todo", "assigneeAgentId": a.ID})
	path := "/api/agents/" + a.ID + "/wakeup"

	var w1, w2, w3 wakeOut
	b.must(http.StatusAccepted, "POST", path, req{body: map[string]any{"reason": "on_demand", "issueId": iss.Identifier, "idempotencyKey": "k1"}}, &w1)
	if w1.Status != "queued" || w1.RunID == nil || w1.Run == nil || w1.Run.IssueID == nil || *w1.Run.IssueID != iss.ID {
		t.Fatalf("first wake: %+v", w1)
	}
	if n, _ := sched.counts(); n != 1 {
		t.Errorf("scheduler nudged %d times, want 1", n)
	}
	// The same key answers the first wake; another key for the same issue coalesces.
	b.must(http.StatusAccepted, "POST", path, req{body: map[string]any{"issueId": iss.ID, "idempotencyKey": "k1"}}, &w2)
	if !w2.Replayed || w2.WakeID != w1.WakeID || w2.RunID == nil || *w2.RunID != *w1.RunID {
		t.Errorf("replayed wake: %+v, first %+v", w2, w1)
	}
	// The same key with a different body (another issue) is refused.
	iss2 := b.issue(co.ID, map[string]any{"status": "todo"})
	b.must(http.StatusUnprocessableEntity, "POST", path, req{body: map[string]any{"issueId": iss2.ID, "idempotencyKey": "k1"}}, nil)
	b.must(http.StatusAccepted, "POST", path, req{body: map[string]any{"issueId": iss.ID}, headers: map[string]string{"Idempotency-Key": "h1"}}, &w3)
	if w3.Status != "coalesced" || w3.RunID == nil || *w3.RunID != *w1.RunID || w3.Replayed {
		t.Errorf("second wake for the issue: %+v", w3)
	}
	var w4 wakeOut
	b.must(http.StatusAccepted, "POST", path, req{body: map[string]any{"issueId": iss.ID}, headers: map[string]string{"Idempotency-Key": "h1"}}, &w4)
	if !w4.Replayed || w4.WakeID != w3.WakeID {
		t.Errorf("Idempotency-Key header not honoured: %+v, first %+v", w4, w3)
	}

	// The agent itself may wake itself (with or without a run); others may not.
	var runs []*clasp.Run
	b.must(http.StatusAccepted, "POST", path, req{token: keyA, body: map[string]any{}}, nil)
	wantErr(t, b.do("POST", path, req{token: keyB, body: map[string]any{}}), http.StatusForbidden, clasp.CodeForbidden, "")
	wantErr(t, b.do("POST", path, req{token: keyX, body: map[string]any{}}), http.StatusNotFound, clasp.CodeNotFound, "")
	b.must(http.StatusOK, "GET", "/api/companies/"+co.ID+"/runs?agentId="+a.ID, req{}, &runs)
	if len(runs) != 2 { // the issue's run and the run without an issue
		t.Errorf("agent has %d runs after the wakes, want 2", len(runs))
	}

	wantErr(t, b.do("POST", path, req{body: map[string]any{"reason": "whenever"}}), http.StatusBadRequest, clasp.CodeInvalidRequest, "reason")
	wantErr(t, b.do("POST", path, req{body: map[string]any{"issueId": "WAK-999"}}), http.StatusNotFound, clasp.CodeNotFound, "")
	wantErr(t, b.do("POST", "/api/agents/"+iss.ID+"/wakeup", req{body: map[string]any{}}), http.StatusNotFound, clasp.CodeNotFound, "")
}

func TestRunLog(t *testing.T) {
	b := setup(t)
	co := b.company("LOG")
	a, keyA := b.agent(co.ID, "alpha")
	_, keyB := b.agent(co.ID, "beta")
	run := b.run(keyA)
	path := "/api/runs/" + run.ID + "/log"
	wantErr(t, b.do("GET", path, req{}), http.StatusNotFound, clasp.CodeNotFound, "")

	writeRunLog(b, run.ID, "line one\nline two\n")
	res := b.must(http.StatusOK, "GET", path, req{}, nil)
	if string(res.body) != "line one\nline two\n" || res.header.Get(LogSizeHeader) != "18" || res.header.Get(RunStatusHeader) != "running" ||
		res.header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Errorf("log: %q, headers %v", res.body, res.header)
	}
	res = b.must(http.StatusOK, "GET", path+"?offset=9", req{token: keyA}, nil)
	if string(res.body) != "line two\n" || res.header.Get(LogSizeHeader) != "18" {
		t.Errorf("log from 9: %q, size %s", res.body, res.header.Get(LogSizeHeader))
	}
	res = b.must(http.StatusOK, "GET", path+"?offset=100", req{}, nil)
	if len(res.body) != 0 || res.header.Get(LogSizeHeader) != "18" {
		t.Errorf("log past its end: %q, size %s", res.body, res.header.Get(LogSizeHeader))
	}
	wantErr(t, b.do("GET", path+"?offset=-1", req{}), http.StatusBadRequest, clasp.CodeInvalidRequest, "offset")
	// Another agent of the company does not see the run's log.
	wantErr(t, b.do("GET", path, req{token: keyB}), http.StatusNotFound, clasp.CodeNotFound, "")
	_ = a
}

func TestRunCancel(t *testing.T) {
	sched := &fakeScheduler{}
	b := setup(t, func(o *setupOpts) { o.scheduler = sched })
	co := b.company("CAN")
	a, keyA := b.agent(co.ID, "alpha")
	b.must(http.StatusOK, "PATCH", "/api/agents/"+a.ID, req{body: map[string]any{"adapter": processAdapter()}}, nil)
	iss := b.issue(co.ID, map[string]any{"status": "todo"})
	var w wakeOut
	b.must(http.StatusAccepted, "POST", "/api/agents/"+a.ID+"/wakeup", req{body: map[string]any{"issueId": iss.ID}}, &w)
	if w.RunID == nil {
		t.Fatalf("wake: %+v", w)
	}
	path := "/api/runs/" + *w.RunID + "/cancel"
	wantErr(t, b.do("POST", path, req{token: keyA, body: map[string]any{}}), http.StatusForbidden, clasp.CodeForbidden, "")

	// No process of the scheduler runs it: the store cancels it, releasing its execution lock.
	var run clasp.Run
	b.must(http.StatusOK, "POST", path, req{body: map[string]any{}}, &run)
	if run.Status != clasp.RunCancelled {
		t.Errorf("cancelled run is %s", run.Status)
	}
	if _, cancels := sched.counts(); !cmp.Equal(cancels, []string{*w.RunID}) {
		t.Errorf("scheduler cancels %v", cancels)
	}
	if got := b.getIssue(iss.ID); got.ExecutionRunID != nil {
		t.Errorf("execution lock left on the cancelled run: %v", *got.ExecutionRunID)
	}
	wantErr(t, b.do("POST", path, req{body: map[string]any{}}), http.StatusConflict, clasp.CodeRunNotLive, "")

	// A run the scheduler runs: it is told, and stops the process itself.
	sched.cancelOK = true
	live := b.run(keyA)
	b.must(http.StatusOK, "POST", "/api/runs/"+live.ID+"/cancel", req{body: map[string]any{}}, &run)
	if run.ID != live.ID || run.Status != clasp.RunRunning {
		t.Errorf("run handed to the scheduler: %s %s", run.ID, run.Status)
	}
	if _, cancels := sched.counts(); len(cancels) != 2 || cancels[1] != live.ID {
		t.Errorf("scheduler cancels %v", cancels)
	}
	wantErr(t, b.do("POST", "/api/runs/"+iss.ID+"/cancel", req{body: map[string]any{}}), http.StatusNotFound, clasp.CodeNotFound, "")
}

// TestAgentWakeupRespectsOwnership: a wake's run takes the issue's
// execution lock, so an agent may wake itself only for an issue it may
// check out (its own or unassigned, not done or cancelled), and the board
// may wake an agent only for such an issue too. A refused wake is 409
// checkout_conflict (another agent's issue) or 422 precondition_failed
// (done or cancelled) and takes no lock: the assignee still checks its
// issue out.
func TestAgentWakeupRespectsOwnership(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, b *bundle) {
		co := b.company("OWN")
		a, keyA := b.agent(co.ID, "alpha")
		bb, keyB := b.agent(co.ID, "beta")
		for _, ag := range []*clasp.Agent{a, bb} {
			b.must(http.StatusOK, "PATCH", "/api/agents/"+ag.ID, req{body: map[string]any{"adapter": processAdapter()}}, nil)
		}
		bIssue := b.issue(co.ID, map[string]any{"status": "todo", "assigneeAgentId": bb.ID})
		done := b.issue(co.ID, map[string]any{"status": "done"})
		cancelled := b.issue(co.ID, map[string]any{"status": "cancelled", "assigneeAgentId": a.ID})
		pathA := "/api/agents/" + a.ID + "/wakeup"
		runA := b.run(keyA)
		for _, who := range []req{{token: keyA}, {token: keyA, run: runA.ID}, {}} {
			r := who
			r.body = map[string]any{"issueId": bIssue.Identifier}
			e := wantErr(t, b.do("POST", pathA, r), http.StatusConflict, clasp.CodeCheckoutConflict, "")
			if e.Details["reason"] != clasp.ReasonAssignedToOtherAgent || e.Details["assigneeAgentId"] != bb.ID || e.Details["issueId"] != bIssue.ID {
				t.Errorf("wake of A for B's issue: details %v", e.Details)
			}
			for _, closed := range []*clasp.Issue{done, cancelled} {
				r.body = map[string]any{"issueId": closed.ID}
				e := wantErr(t, b.do("POST", pathA, r), http.StatusUnprocessableEntity, clasp.CodePreconditionFailed, "")
				if e.Details["reason"] != "issue_closed" || e.Details["issueId"] != closed.ID {
					t.Errorf("wake of A for a %s issue: details %v", closed.Status, e.Details)
				}
			}
		}
		for _, iss := range []*clasp.Issue{bIssue, done, cancelled} {
			if got := b.getIssue(iss.ID); got.ExecutionRunID != nil || got.CheckoutRunID != nil || got.Status != iss.Status {
				t.Errorf("issue %s after refused wakes: status %s execution %v checkout %v; want unchanged, unlocked",
					iss.Identifier, got.Status, got.ExecutionRunID, got.CheckoutRunID)
			}
		}
		var runs []*clasp.Run
		b.must(http.StatusOK, "GET", "/api/companies/"+co.ID+"/runs?agentId="+a.ID, req{}, &runs)
		if len(runs) != 1 { // only the run A opened itself
			t.Errorf("A has %d runs after refused wakes, want 1", len(runs))
		}
		// B, the assignee, checks its issue out: no lock of A's stands in its way.
		runB := b.run(keyB)
		if r := b.checkout(bIssue.ID, keyB, runB.ID, bb.ID); r.status != http.StatusOK {
			t.Errorf("checkout by the assignee after A's refused wakes: %d %s", r.status, r.body)
		}
		// A may wake itself for an unassigned issue, and the board may wake B for its own.
		free := b.issue(co.ID, map[string]any{"status": "todo"})
		var w wakeOut
		b.must(http.StatusAccepted, "POST", pathA, req{token: keyA, body: map[string]any{"issueId": free.ID}}, &w)
		if w.Status != "queued" {
			t.Errorf("wake of A for an unassigned issue: %+v", w)
		}
		mine := b.issue(co.ID, map[string]any{"status": "blocked", "assigneeAgentId": bb.ID})
		b.must(http.StatusAccepted, "POST", "/api/agents/"+bb.ID+"/wakeup", req{body: map[string]any{"issueId": mine.ID}}, &w)
		if w.Status != "queued" {
			t.Errorf("board's wake of B for B's issue: %+v", w)
		}
	})
}
