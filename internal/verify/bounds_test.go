package verify

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// TestAnsweredUnavailableIsBounded: an answered 503 (a terminated
// database connection, a database restart) is an unknown outcome whose
// return is the answer time, not the end of the history (it made
// PostgreSQL histories undecided).
func TestAnsweredUnavailableIsBounded(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"error":"The database is unavailable; retry shortly.","code":"unavailable","details":{}}`)
	}))
	defer ts.Close()
	r := &runner{hc: ts.Client(), start: time.Now()}
	out := r.record(context.Background(), ts.URL, ts.URL, 0, Input{Kind: OpCheckout, Issue: "i", Run: "r", Agent: "a"}, "", "r", "POST", "/api/issues/i/checkout", map[string]any{})
	if !out.Unknown || out.Status != http.StatusServiceUnavailable {
		t.Fatalf("output %+v, want an unknown 503", out)
	}
	o := r.ops[0]
	if o.Return == math.MaxInt64 || o.Return != o.Seen || o.Return < o.Call {
		t.Errorf("op call %d return %d seen %d: want the return bounded at the answer", o.Call, o.Return, o.Seen)
	}
}

// TestBoundUnknownsNeverWidens: a kill after an answered 503 must not move
// its return later (boundUnknowns used to set kill + grace whatever the
// return was); an open one is bounded by the first kill after its call;
// a reset seen during a drop of its replica is bounded where seen, one
// seen outside any drop stays open.
func TestBoundUnknownsNeverWidens(t *testing.T) {
	start := time.Now()
	const u = "http://replica-1"
	r := &runner{start: start, ops: []op{
		{URL: u, Call: 10, Return: 20, Seen: 20, Output: Output{Unknown: true, Status: 503}},
		{URL: u, Call: 10, Return: math.MaxInt64, Seen: 30, Output: Output{Unknown: true}},
		{URL: u, Call: int64(2 * time.Second), Return: math.MaxInt64, Seen: int64(2*time.Second + 50*time.Millisecond), Output: Output{Unknown: true, reset: true}},
		{URL: u, Call: int64(9 * time.Second), Return: math.MaxInt64, Seen: int64(9*time.Second + 50*time.Millisecond), Output: Output{Unknown: true, reset: true}},
	}}
	killed := map[string][]kill{u: {{at: start.Add(time.Second)}, {at: start.Add(10 * time.Second)}}}
	drops := map[string][][2]time.Time{u: {{start.Add(2 * time.Second), start.Add(2*time.Second + dropFor)}}}
	r.boundUnknowns(faultLog{killed: killed, drops: drops})
	want := []int64{20, int64(time.Second), int64(2*time.Second + 50*time.Millisecond), int64(10 * time.Second)}
	for i, w := range want {
		if r.ops[i].Return != w {
			t.Errorf("op %d: return %d, want %d", i, r.ops[i].Return, w)
		}
	}
}

// TestModelForgetsDoneRuns: the model's state must not keep every run
// that ever finished (each step copied and compared the whole set, which
// made 30 s histories undecided): over 2,000 runs that each check out,
// release and finish, the set of states and each state's finished runs
// stay small.
func TestModelForgetsDoneRuns(t *testing.T) {
	var h []porcupine.Operation
	now := int64(0)
	add := func(in Input, out Output) {
		h = append(h, porcupine.Operation{ClientId: 0, Input: in, Output: out, Call: now, Return: now + 1})
		now += 2
	}
	for i := range 2000 {
		run := fmt.Sprintf("run-%d", i)
		add(Input{Kind: OpCheckout, Issue: "i", Run: run, Agent: "a"}, Output{OK: true, Issue: &Lock{Status: "in_progress", Assignee: "a", Holder: run, Epoch: int64(i + 1), L7: true}})
		add(Input{Kind: OpRelease, Issue: "i", Run: run, Agent: "a"}, Output{OK: true, Issue: &Lock{Status: "todo", Assignee: "a", Epoch: int64(i + 1), L7: true}})
		add(Input{Kind: OpFinish, Run: run, Agent: "a"}, Output{OK: true})
	}
	m := Model()
	parts := m.Partition(h)
	if len(parts) != 1 {
		t.Fatalf("%d partitions, want 1", len(parts))
	}
	st := m.Init()
	maxStates, maxFinished := 0, 0
	for _, o := range parts[0] {
		ok, next := m.Step(st, o.Input, o.Output)
		if !ok {
			t.Fatalf("step %s refused", describeOp(o.Input, o.Output))
		}
		st = next
		states := st.([]any)
		maxStates = max(maxStates, len(states))
		for _, s := range states {
			maxFinished = max(maxFinished, len(s.(state).finished))
		}
	}
	if maxStates > 8 || maxFinished > 2 {
		t.Errorf("up to %d states with up to %d finished runs: want at most 8 and 2", maxStates, maxFinished)
	}
}

// TestDeadlineBoundsUnknowns: on PostgreSQL with a server deadline D, an
// unknown outcome is over 2D + deadlineGrace after its call (the server's
// deadline, then the statement timeout), unless its replica was paused in
// that window (a stopped process enforces no deadline: the kill after the
// pause bounds it); a kill whose sessions were seen ending bounds at that
// moment, without killGrace.
func TestDeadlineBoundsUnknowns(t *testing.T) {
	start := time.Now()
	const u, paused = "http://replica-1", "http://replica-2"
	r := &runner{start: start, cfg: Config{DatabaseURL: "postgres://x", ServerDeadline: time.Second}, ops: []op{
		{URL: u, Call: 0, Return: math.MaxInt64, Output: Output{Unknown: true}},
		{URL: paused, Call: 0, Return: math.MaxInt64, Output: Output{Unknown: true}},
		{URL: u, Call: int64(20 * time.Second), Return: math.MaxInt64, Output: Output{Unknown: true}},
	}}
	r.boundUnknowns(faultLog{
		killed: map[string][]kill{
			paused: {{at: start.Add(5 * time.Second)}},
			u:      {{at: start.Add(20*time.Second + 100*time.Millisecond), over: start.Add(20*time.Second + 300*time.Millisecond)}},
		},
		pauses: map[string][][2]time.Time{paused: {{start.Add(time.Second), start.Add(4 * time.Second)}}},
	})
	want := []int64{int64(2*time.Second + deadlineGrace), int64(5*time.Second + time.Second), int64(20*time.Second + 300*time.Millisecond)}
	for i, w := range want {
		if r.ops[i].Return != w {
			t.Errorf("op %d: return %d, want %d", i, r.ops[i].Return, w)
		}
	}
}

// TestDeadlineCutStaysOpen: a 503 the server's request deadline gave
// (details.deadlineExceeded) is not bounded at its answer, as other 503s
// are: its statement may still be running on the database.
func TestDeadlineCutStaysOpen(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"error":"The request did not finish within the server's deadline of 1s.","code":"unavailable","details":{"deadlineExceeded":true}}`)
	}))
	defer ts.Close()
	r := &runner{hc: ts.Client(), start: time.Now()}
	r.record(context.Background(), ts.URL, ts.URL, 0, Input{Kind: OpCheckout, Issue: "i", Run: "r", Agent: "a"}, "", "r", "POST", "/api/issues/i/checkout", map[string]any{})
	if o := r.ops[0]; !o.Output.Unknown || o.Return != math.MaxInt64 {
		t.Fatalf("op %+v: want an unknown outcome left open", o)
	}
}

// TestFinalReadsCountLostCheckouts: an issue whose final checkout epoch is
// below one a checkout was answered with lost an acknowledged write (a
// failover to a standby that did not have it): counted and reported, and
// the final read is part of the history.
func TestFinalReadsCountLostCheckouts(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"i","identifier":"V-1","status":"in_progress","assigneeAgentId":"a","checkoutRunId":"r1","executionRunId":"r1","checkoutEpoch":2}`)
	}))
	defer ts.Close()
	r := &runner{hc: ts.Client(), start: time.Now(), url: ts.URL, cfg: Config{Clients: 1}, ops: []op{
		{Input: Input{Kind: OpCheckout, Issue: "i", Run: "r2", Agent: "a"}, Call: 1, Return: 2,
			Output: Output{OK: true, Issue: &Lock{Status: "in_progress", Assignee: "a", Holder: "r2", Epoch: 3, L7: true}}},
	}}
	rep := &Report{}
	found, err := r.finalReads(context.Background(), []string{"i"}, rep)
	if err != nil {
		t.Fatal(err)
	}
	if rep.LostWrites != 1 || len(found) != 1 {
		t.Fatalf("lost %d, found %v: want the checkout at epoch 3 counted lost", rep.LostWrites, found)
	}
	if len(r.ops) != 2 || r.ops[1].Input.Kind != OpRead {
		t.Fatalf("ops %+v: want the final read recorded", r.ops)
	}
	res, _, err := Check(r.history(), t.TempDir(), time.Minute)
	if err != nil || res != porcupine.Illegal {
		t.Fatalf("check %v %v: want the history with the lost checkout not linearizable", res, err)
	}
}
