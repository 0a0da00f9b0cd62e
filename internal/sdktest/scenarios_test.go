package sdktest

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// leaseTTL is the scenario servers' lease: short, so that a run that is
// not heartbeated is lost within the heartbeat scenario's work.
const leaseTTL = 3 * time.Second

// hold is how long the heartbeat scenario's handler works: more than two
// leases.
const hold = "7"

// TestScenarios runs every scenario script of each client (Python,
// TypeScript, and the Go client for the scenarios it has the behaviour
// for) against real `clasp serve` processes, on each store, and checks what
// the script saw and what the server holds afterwards. Every client must
// pass the same checks: that is what keeps their behaviour the same.
func TestScenarios(t *testing.T) {
	langs := append(languages(t), goClient)
	for _, backend := range backends(t) {
		t.Run(backend, func(t *testing.T) {
			main := startServer(t, backend, "--lease-ttl", leaseTTL.String(), "--sweep-interval", "250ms")
			events := startServer(t, backend)
			// One credential may send 1 request a second, 3 at once: the
			// scenario's reads run into it at once.
			limited := startServer(t, backend, "--rate-credential", "1", "--rate-credential-burst", "3")
			for _, l := range langs {
				t.Run(l.name, func(t *testing.T) {
					l.ready(t)
					run := func(name, script string, f func(*testing.T, lang, *server), s *server) {
						t.Run(name, func(t *testing.T) {
							if l.only != nil && !l.only[script] {
								t.Skip(l.why)
							}
							f(t, l, s)
						})
					}
					run("checkout", "checkout", scenarioCheckout, main)
					run("idempotent_retry", "idempotent", scenarioIdempotent, main)
					run("lost_answer_retried_once", "lost_answer", scenarioLostAnswer, main)
					run("conflict_names_holder", "conflict", scenarioConflict, main)
					run("claim_until_empty", "claim_until_empty", scenarioClaim, main)
					run("failed_on_exception", "failed_on_exception", scenarioFailed, main)
					run("heartbeat_keeps_lease", "heartbeat", scenarioHeartbeat, main)
					run("sigterm_stops_cleanly", "sigterm", scenarioSigterm, main)
					run("events_resume_after_restart", "events", scenarioEvents, events)
					run("rate_limit_honoured", "rate_limit", scenarioRateLimit, limited)
				})
			}
		})
	}
}

// runOf returns the run, which must have ended with status want.
func runOf(t *testing.T, s *server, id string, want clasp.RunStatus) *clasp.Run {
	t.Helper()
	if id == "" {
		t.Fatal("the script named no run")
	}
	r, err := s.board.RunGet(t.Context(), id)
	if err != nil {
		t.Fatalf("get run %s: %v", id, err)
	}
	if r.Status != want {
		t.Errorf("run %s: status %s (error code %v, error %v), want %s", id, r.Status, deref(r.ErrorCode), deref(r.Error), want)
	}
	return r
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func issue(t *testing.T, s *server, ref string) *clasp.Issue {
	t.Helper()
	iss, err := s.board.IssueGet(t.Context(), ref)
	if err != nil {
		t.Fatalf("get issue %s: %v", ref, err)
	}
	return iss
}

// scenarioCheckout: a run opened by the client checks an issue out (epoch
// 1, held by that run); leaving the block finishes the run succeeded,
// which releases the lock.
func scenarioCheckout(t *testing.T, l lang, s *server) {
	f := newFixture(t, s, 1)
	got := runScript(t, l, "checkout", s, f, "SCN_ISSUE="+f.issues[0].Identifier)
	run := str(got, "run")
	if str(got, "identifier") != f.issues[0].Identifier || str(got, "status") != "in_progress" || num(got, "epoch") != 1 || str(got, "checkoutRunId") != run {
		t.Errorf("checkout answered %v, want %s in_progress at epoch 1 held by run %s", got, f.issues[0].Identifier, run)
	}
	runOf(t, s, run, clasp.RunSucceeded)
	if iss := issue(t, s, f.issues[0].ID); iss.CheckoutRunID != nil || iss.CheckoutEpoch != 1 {
		t.Errorf("after the run: lock %v at epoch %d, want none at epoch 1", deref(iss.CheckoutRunID), iss.CheckoutEpoch)
	}
}

// scenarioIdempotent: a comment sent twice with one Idempotency-Key (a
// retry after a lost answer) is answered with the same comment and
// written once.
func scenarioIdempotent(t *testing.T, l lang, s *server) {
	f := newFixture(t, s, 1)
	got := runScript(t, l, "idempotent", s, f, "SCN_ISSUE="+f.issues[0].Identifier, "SCN_NONCE="+nonce())
	if str(got, "first") == "" || str(got, "first") != str(got, "again") {
		t.Errorf("the repeat answered comment %q, the first %q: want the same", str(got, "again"), str(got, "first"))
	}
	cs, err := s.board.CommentList(t.Context(), f.issues[0].ID, client.CommentListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Body != "once" || cs[0].ID != str(got, "first") {
		t.Errorf("the issue has %d comments (%v), want the one comment %q", len(cs), cs, str(got, "first"))
	}
	runOf(t, s, str(got, "run"), clasp.RunSucceeded)
}

// scenarioLostAnswer: the answer to a comment is lost (a proxy closes the
// connection after the server wrote it); the client sends it again with
// the same Idempotency-Key, gets the first answer and the comment is
// written once.
func scenarioLostAnswer(t *testing.T, l lang, s *server) {
	f := newFixture(t, s, 1)
	proxy := startLossyProxy(t, s.url, "POST", "/comments")
	through := *s
	through.url = proxy.url
	got := runScript(t, l, "lost_answer", &through, f, "SCN_ISSUE="+f.issues[0].Identifier)
	if proxy.lost.Load() != 1 || proxy.matched.Load() != 2 {
		t.Errorf("the proxy lost %d answers of %d comment requests, want 1 of 2 (a retry after the lost one)", proxy.lost.Load(), proxy.matched.Load())
	}
	cs, err := s.board.CommentList(t.Context(), f.issues[0].ID, client.CommentListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Body != "lost once" || cs[0].ID != str(got, "comment") {
		t.Errorf("comments %v; the client answered %q: want the one comment, written once, answered after the retry", cs, str(got, "comment"))
	}
	runOf(t, s, str(got, "run"), clasp.RunSucceeded)
}

// scenarioConflict: a checkout of an issue another live run of the agent
// holds raises the client's conflict error naming the holder, is sent
// once, and changes nothing.
func scenarioConflict(t *testing.T, l lang, s *server) {
	f := newFixture(t, s, 1)
	ctx := t.Context()
	kc := client.New(s.url, client.WithToken(f.key))
	holder, err := kc.RunOpen(ctx, client.RunOpenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	hc := kc.WithRun(holder.ID)
	defer func() {
		_, _ = hc.RunFinish(context.WithoutCancel(ctx), holder.ID, client.RunFinishRequest{Status: clasp.RunSucceeded})
	}()
	if _, err := hc.IssueCheckout(ctx, f.issues[0].ID, client.CheckoutRequest{AgentID: f.agent.ID, ExpectedStatuses: []clasp.IssueStatus{clasp.IssueTodo}}); err != nil {
		t.Fatal(err)
	}
	// The holder stays live however long the script takes to start: it
	// heartbeats every third of the lease until the scenario ends.
	hbCtx, stopHB := context.WithCancel(ctx)
	var hb sync.WaitGroup
	hb.Go(func() {
		tick := time.NewTicker(leaseTTL / 3)
		defer tick.Stop()
		for {
			select {
			case <-hbCtx.Done():
				return
			case <-tick.C:
				_, _ = hc.RunHeartbeat(hbCtx, holder.ID)
			}
		}
	})
	defer func() { stopHB(); hb.Wait() }()
	// Through a proxy that loses nothing and counts the checkouts: a 409
	// is never sent again.
	proxy := startLossyProxy(t, s.url, "POST", "/checkout")
	proxy.lost.Store(1)
	through := *s
	through.url = proxy.url
	got := runScript(t, l, "conflict", &through, f, "SCN_ISSUE="+f.issues[0].Identifier)
	if n := proxy.matched.Load(); n != 1 {
		t.Errorf("the client sent %d checkouts, want 1: a 409 is never retried", n)
	}
	want := map[string]any{"status": 409.0, "code": "checkout_conflict", "holderRunId": holder.ID, "holderAgentId": f.agent.ID, "reason": "held_by_live_run"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("conflict error %s = %v, want %v", k, got[k], v)
		}
	}
	if iss := issue(t, s, f.issues[0].ID); deref(iss.CheckoutRunID) != holder.ID || iss.CheckoutEpoch != 1 {
		t.Errorf("after the refused checkout: held by %s at epoch %d, want %s at 1", deref(iss.CheckoutRunID), iss.CheckoutEpoch, holder.ID)
	}
	runOf(t, s, str(got, "run"), clasp.RunSucceeded)
}

// scenarioClaim: claims take every free issue once, then answer none.
func scenarioClaim(t *testing.T, l lang, s *server) {
	f := newFixture(t, s, 3)
	got := runScript(t, l, "claim_until_empty", s, f)
	var claimed []string
	for _, v := range got["claimed"].([]any) {
		claimed = append(claimed, v.(string))
	}
	var want []string
	for _, iss := range f.issues {
		want = append(want, iss.Identifier)
	}
	slices.Sort(claimed)
	if !slices.Equal(claimed, want) {
		t.Errorf("claimed %v, want each of %v once", claimed, want)
	}
	runOf(t, s, str(got, "run"), clasp.RunSucceeded)
}

// scenarioFailed: a run whose block raises is finished failed with the
// exception's text (its lock released); work releases the issue whose
// handler raised (back to todo) and finishes its run failed.
func scenarioFailed(t *testing.T, l lang, s *server) {
	f := newFixture(t, s, 2)
	got := runScript(t, l, "failed_on_exception", s, f, "SCN_ISSUE="+f.issues[0].Identifier)
	if r := runOf(t, s, str(got, "run"), clasp.RunFailed); !strings.Contains(deref(r.Error), "boom in the block") {
		t.Errorf("run error %q, want the exception's text", deref(r.Error))
	}
	if r := runOf(t, s, str(got, "workRun"), clasp.RunFailed); !strings.Contains(deref(r.Error), "boom in the handler") {
		t.Errorf("work run error %q, want the handler's exception text", deref(r.Error))
	}
	if iss := issue(t, s, str(got, "workIssue")); iss.Status != clasp.IssueTodo || iss.CheckoutRunID != nil {
		t.Errorf("the issue whose handler raised is %s held by %s, want todo and released", iss.Status, deref(iss.CheckoutRunID))
	}
	if iss := issue(t, s, f.issues[0].ID); iss.CheckoutRunID != nil {
		t.Errorf("the failed run's issue is still held by %s", deref(iss.CheckoutRunID))
	}
}

// scenarioHeartbeat: work whose handler takes more than two leases keeps
// its run alive by heartbeats: the result is written by that run, which
// ends succeeded and was never found lost.
func scenarioHeartbeat(t *testing.T, l lang, s *server) {
	f := newFixture(t, s, 1)
	got := runScript(t, l, "heartbeat", s, f, "SCN_HOLD="+hold)
	if num(got, "done") != 1 || str(got, "issue") != f.issues[0].Identifier {
		t.Errorf("work answered %v, want 1 issue done: %s", got, f.issues[0].Identifier)
	}
	runOf(t, s, str(got, "run"), clasp.RunSucceeded)
	iss := issue(t, s, f.issues[0].ID)
	if iss.Status != clasp.IssueDone {
		t.Errorf("issue status %s, want done", iss.Status)
	}
	cs, err := s.board.CommentList(t.Context(), f.issues[0].ID, client.CommentListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Body != "held "+hold+".0s" || deref(cs[0].RunID) != str(got, "run") {
		t.Errorf("comments %v, want one result comment %q of run %s", cs, "held "+hold+".0s", str(got, "run"))
	}
	lost, err := s.board.CompanyActivity(t.Context(), f.co.ID, client.ActivityListParams{Action: "run.lost"})
	if err != nil {
		t.Fatal(err)
	}
	if len(lost.Items) > 0 {
		t.Errorf("%d run.lost rows: the heartbeat did not keep the lease", len(lost.Items))
	}
}

// scenarioSigterm: SIGTERM during a handler lets work finish the issue in
// hand (result, done, run succeeded) and stop before the next one. The
// handler waits for a file the test creates after the signal, so the
// signal always lands mid-handler.
func scenarioSigterm(t *testing.T, l lang, s *server) {
	f := newFixture(t, s, 2)
	release := filepath.Join(t.TempDir(), "release")
	p := startScript(t, l, "sigterm", s, f, "SCN_RELEASE="+release)
	select {
	case m, ok := <-p.lines:
		if !ok || str(m, "started") == "" {
			t.Fatalf("the script did not start a handler: %v %v\n%s", m, <-p.done, p.stderr.String())
		}
	case <-time.After(scriptTimeout):
		t.Fatalf("no handler started within %s; stderr:\n%s", scriptTimeout, p.stderr.String())
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The handler ends only now, after the signal: it must still finish
	// its issue, and take no other.
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	lines := p.wait(t) // exit 0
	if len(lines) != 1 || num(lines[0], "done") != 1 {
		t.Fatalf("after SIGTERM the script printed %v, want work to answer 1 issue done", lines)
	}
	got := lines[0]
	runOf(t, s, str(got, "run"), clasp.RunSucceeded)
	for _, iss := range f.issues {
		cur := issue(t, s, iss.ID)
		want := clasp.IssueTodo
		if iss.Identifier == str(got, "issue") {
			want = clasp.IssueDone
		}
		if cur.Status != want || cur.CheckoutRunID != nil {
			t.Errorf("%s is %s held by %s, want %s and unlocked", iss.Identifier, cur.Status, deref(cur.CheckoutRunID), want)
		}
	}
}

// scenarioEvents: the event stream yields every row once, in order, also
// those written after the server was killed and restarted (same port and
// data) while the client's reconnection was held back by a proxy: the
// client resumes with Last-Event-ID.
func scenarioEvents(t *testing.T, l lang, s *server) {
	f := newFixture(t, s, 0)
	ctx := t.Context()
	last, err := s.board.CompanyActivity(ctx, f.co.ID, client.ActivityListParams{Limit: 1})
	if err != nil || len(last.Items) != 1 {
		t.Fatalf("latest activity: %v (%d rows)", err, len(last.Items))
	}
	from := last.Items[0].ID
	// The script reaches the server through a proxy that can hold its
	// reconnection until rows were written behind its back.
	proxy := startLossyProxy(t, s.url, "", "")
	through := *s
	through.url = proxy.url
	p := startScript(t, l, "events", &through, f, "SCN_STOP_AFTER=3", "SCN_LAST_EVENT_ID="+itoa(from))
	create := func(title string) *clasp.Issue {
		iss, err := s.board.IssueCreate(ctx, f.co.ID, client.IssueCreateRequest{Title: title})
		if err != nil {
			t.Fatal(err)
		}
		return iss
	}
	first := create("before the restart")

	var seen []map[string]any
	select {
	case m, ok := <-p.lines:
		if !ok {
			t.Fatalf("the script ended before the first event: %v\n%s", <-p.done, p.stderr.String())
		}
		seen = append(seen, m)
	case <-time.After(scriptTimeout):
		t.Fatalf("no event within %s; stderr:\n%s", scriptTimeout, p.stderr.String())
	}
	if str(seen[0], "entityId") != first.ID {
		t.Fatalf("first event %v, want the creation of %s", seen[0], first.ID)
	}
	proxy.hold()
	if err := s.srv.Restart(ctx); err != nil { // SIGKILL, then a new process on the same port
		t.Fatal(err)
	}
	// The client's reconnection is held; the rows are written meanwhile:
	// only Last-Event-ID brings them.
	select {
	case <-proxy.held:
	case <-time.After(scriptTimeout):
		t.Fatalf("the client did not reconnect within %s; stderr:\n%s", scriptTimeout, p.stderr.String())
	}
	create("after the restart 1")
	create("after the restart 2")
	proxy.release()
	seen = append(seen, p.wait(t)...)
	rows, err := s.board.CompanyActivity(ctx, f.co.ID, client.ActivityListParams{})
	if err != nil {
		t.Fatal(err)
	}
	var want, got []int64
	for _, a := range rows.Items {
		if a.ID > from {
			want = append(want, a.ID)
		}
	}
	slices.Sort(want)
	for _, m := range seen {
		got = append(got, int64(num(m, "id")))
	}
	if !slices.Equal(got, want) {
		t.Errorf("the stream yielded rows %v, want %v: each once, in order", got, want)
	}
}

// scenarioRateLimit: a client told not to wait raises its rate-limited
// error with the Retry-After; a client that waits (the default) gets every
// answer, having waited as told.
func scenarioRateLimit(t *testing.T, l lang, s *server) {
	f := newFixture(t, s, 1)
	got := runScript(t, l, "rate_limit", s, f, "SCN_ISSUE="+f.issues[0].Identifier)
	if num(got, "status") != 429 || str(got, "code") != "rate_limited" || num(got, "retryAfter") < 1 {
		t.Errorf("rate-limited error %v, want status 429, code rate_limited, retry after at least 1 s", got)
	}
	if num(got, "refusedAfter") < 1 {
		t.Errorf("refused after %v reads, want the burst's reads answered first", got["refusedAfter"])
	}
	// The bucket was empty and refills at 1 a second: 4 reads cannot all
	// be answered within a second unless the limit was ignored.
	if secs := num(got, "patientSeconds"); secs < 1 {
		t.Errorf("4 reads at 1 a second took %.2f s, want the Retry-After waited out", secs)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestPythonAsyncio runs the asyncio flavour of the Python client
// (clasp.aio): a run as an async context manager checks an issue out and
// sets it done, then work with an async handler does the next one.
func TestPythonAsyncio(t *testing.T) {
	py := pythonLang()
	py.ready(t)
	s := startServer(t, "sqlite")
	f := newFixture(t, s, 2)
	got := runScript(t, py, "aio", s, f, "SCN_ISSUE="+f.issues[0].Identifier)
	runOf(t, s, str(got, "run"), clasp.RunSucceeded)
	if num(got, "done") != 1 || str(got, "workIssue") != f.issues[1].Identifier {
		t.Errorf("async work answered %v, want %s done", got, f.issues[1].Identifier)
	}
	for i, want := range []string{"async", "async work"} {
		iss := issue(t, s, f.issues[i].ID)
		cs, err := s.board.CommentList(t.Context(), iss.ID, client.CommentListParams{})
		if err != nil {
			t.Fatal(err)
		}
		if iss.Status != clasp.IssueDone || len(cs) != 1 || cs[0].Body != want {
			t.Errorf("%s: %s with comments %v, want done with the one comment %q", iss.Identifier, iss.Status, cs, want)
		}
	}
}
