package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// crashingStore creates issues with the real store, then panics once: the
// server dies after the creating transaction committed and before it
// answered.
type crashingStore struct {
	store.Store
	crashed atomic.Bool
}

func (s *crashingStore) IssueCreate(ctx context.Context, p *store.IssueCreateParams) (*clasp.Issue, error) {
	iss, err := s.Store.IssueCreate(ctx, p)
	if err == nil && s.crashed.CompareAndSwap(false, true) {
		panic("crash after the create committed")
	}
	return iss, err
}

// TestIdempotencyKeyCrashAfterCreateReplays: the Idempotency-Key was
// reserved, the issue created and the key completed in three transactions,
// so a crash after the create left the key stranded (409 for ten minutes,
// then a duplicate). Now the key is recorded in the creating transaction:
// the retry after the crash answers the issue created, replayed, and
// creates nothing.
func TestIdempotencyKeyCrashAfterCreateReplays(t *testing.T) {
	t.Parallel()
	b := setup(t)
	co := b.company("CR")
	srv := New(Config{Store: &crashingStore{Store: b.st}, Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry()})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	crashing := &bundle{t: t, st: b.st, srv: srv, ts: ts, hc: ts.Client(), board: b.board}

	path := "/api/companies/" + co.ID + "/issues"
	hr, _ := http.NewRequest("POST", ts.URL+path, strings.NewReader(`{"title":"once"}`))
	hr.Header.Set("Authorization", "Bearer "+b.board)
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Idempotency-Key", "crash-1")
	res, err := ts.Client().Do(hr)
	if err != nil {
		t.Fatalf("first request: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusInternalServerError {
		t.Fatalf("first request: status %d, want 500 (the crash)", res.StatusCode)
	}

	retry := crashing.must(http.StatusCreated, "POST", path, req{raw: []byte(`{"title":"once"}`), headers: map[string]string{"Idempotency-Key": "crash-1"}}, nil)
	if retry.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("retry after the crash: Idempotent-Replayed %q, want true (the issue was created before the crash)", retry.header.Get("Idempotent-Replayed"))
	}
	var issues []*clasp.Issue
	b.must(http.StatusOK, "GET", path, req{}, &issues)
	if len(issues) != 1 || issues[0].ID != decode[clasp.Issue](t, retry).ID {
		t.Errorf("issues after crash and retry: got %d, want exactly the one the retry answered", len(issues))
	}
}

// TestIdempotentRunOpenKeepsTokenStoresNone: a replayed POST
// /agents/me/runs answers the same run with the same run token, so no
// token given out stops working, also for ten concurrent opens with one
// key; no token is anywhere in the database file (it is derived from the
// API key, not stored); a replay under another API key of the agent is 422
// idempotency_key_reused and the token stays valid; a replay once the run
// has ended answers 409 run_not_live.
func TestIdempotentRunOpenKeepsTokenStoresNone(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, b *bundle) {
		w := b.world("RK")
		key := map[string]string{"Idempotency-Key": "run-1"}
		var first, again clasp.Run
		b.must(http.StatusCreated, "POST", "/api/agents/me/runs", req{token: w.ka, body: map[string]any{}, headers: key}, &first)
		res := b.must(http.StatusCreated, "POST", "/api/agents/me/runs", req{token: w.ka, body: map[string]any{}, headers: key}, &again)
		if res.header.Get("Idempotent-Replayed") != "true" || again.ID != first.ID {
			t.Fatalf("replay: got run %s (Idempotent-Replayed %q), want run %s replayed", again.ID, res.header.Get("Idempotent-Replayed"), first.ID)
		}
		if !strings.HasPrefix(first.RunToken, "clasp_rt_") || again.RunToken != first.RunToken {
			t.Errorf("replayed runToken %q, first %q: want the same clasp_rt_ token", again.RunToken, first.RunToken)
		}
		b.must(http.StatusOK, "POST", "/api/runs/"+first.ID+"/heartbeat", req{token: first.RunToken}, nil)

		// Ten concurrent opens with a new key: one run, one token, and it works.
		const n = 10
		var wg sync.WaitGroup
		answers := make([]*resp, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				answers[i] = b.do("POST", "/api/agents/me/runs", req{token: w.ka, body: map[string]any{}, headers: map[string]string{"Idempotency-Key": "run-c"}})
			}()
		}
		wg.Wait()
		var runC *clasp.Run
		for i, a := range answers {
			if a.status != http.StatusCreated {
				t.Errorf("concurrent open %d: %d %s", i, a.status, a.body)
				continue
			}
			r := decode[clasp.Run](t, a)
			if runC == nil {
				runC = r
			}
			if r.ID != runC.ID || r.RunToken != runC.RunToken {
				t.Errorf("concurrent open %d: run %s token %q, want run %s token %q", i, r.ID, r.RunToken, runC.ID, runC.RunToken)
			}
		}
		if runC != nil {
			b.must(http.StatusOK, "POST", "/api/runs/"+runC.ID+"/heartbeat", req{token: runC.RunToken}, nil)
		}

		// Another API key of the same agent may not replay the open: its
		// token would differ, and the first one must stay valid.
		var k2 clasp.APIKey
		b.must(http.StatusCreated, "POST", "/api/agents/"+w.a.ID+"/keys", req{body: map[string]any{}}, &k2)
		e := wantErr(t, b.do("POST", "/api/agents/me/runs", req{token: k2.Token, body: map[string]any{}, headers: key}), 422, clasp.CodeIdempotencyKeyReused, "")
		if e.Details["runId"] != first.ID {
			t.Errorf("replay under another key: details %v, want runId %s", e.Details, first.ID)
		}
		b.must(http.StatusOK, "POST", "/api/runs/"+first.ID+"/heartbeat", req{token: first.RunToken}, nil)

		for _, f := range []string{b.db, b.db + "-wal"} { // SQLite's files (none on PostgreSQL)
			data, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			if bytes.Contains(data, []byte(first.RunToken)) {
				t.Errorf("%s holds a run token in clear", f)
			}
		}

		b.must(http.StatusOK, "POST", "/api/runs/"+first.ID+"/finish", req{token: first.RunToken, body: map[string]any{"status": "succeeded"}}, nil)
		wantErr(t, b.do("POST", "/api/agents/me/runs", req{token: w.ka, body: map[string]any{}, headers: key}), 409, clasp.CodeRunNotLive, "")
		var runs []*clasp.Run
		b.must(http.StatusOK, "GET", "/api/companies/"+w.c.ID+"/runs?agentId="+w.a.ID, req{}, &runs)
		if len(runs) != 4 { // the world's two, and the ones opened with keys run-1 and run-c
			t.Errorf("runs of A: got %d, want 4", len(runs))
		}
	})
}

// TestTerminateAgentEndsRunsAndLocks: terminating an agent left its runs
// running and their locks held, and setting it active again revived its run
// tokens. Now PATCH status terminated cancels its runs (errorCode
// agent_terminated) and frees their issues in the same transaction, and
// terminated is final (422 precondition_failed).
func TestTerminateAgentEndsRunsAndLocks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world("TM")
	i1 := b.issue(w.c.ID, map[string]any{"status": "todo"})
	if res := b.checkout(i1.ID, w.ra1.RunToken, "", w.a.ID); res.status != http.StatusOK {
		t.Fatalf("checkout: %d %s", res.status, res.body)
	}
	b.must(http.StatusOK, "PATCH", "/api/agents/"+w.a.ID, req{body: map[string]any{"status": "terminated"}}, nil)
	for _, r := range []*clasp.Run{w.ra1, w.ra2} {
		var got clasp.Run
		b.must(http.StatusOK, "GET", "/api/runs/"+r.ID, req{}, &got)
		if got.Status != clasp.RunCancelled || got.ErrorCode == nil || *got.ErrorCode != clasp.RunErrorAgentTerminated {
			t.Errorf("run %s of the terminated agent: got %s (errorCode %v), want cancelled, agent_terminated", r.ID, got.Status, got.ErrorCode)
		}
	}
	if iss := b.getIssue(i1.ID); iss.CheckoutRunID != nil || iss.ExecutionRunID != nil {
		t.Errorf("issue of the terminated agent's run: locks %v/%v, want none", iss.CheckoutRunID, iss.ExecutionRunID)
	}
	if n := countAction(b.activity(i1.ID), clasp.ActionIssueLockReleased); n != 1 {
		t.Errorf("issue.lock_released rows: got %d, want 1", n)
	}
	for _, st := range []string{"active", "paused"} {
		wantErr(t, b.do("PATCH", "/api/agents/"+w.a.ID, req{body: map[string]any{"status": st}}), 422, clasp.CodePreconditionFailed, "status")
	}
	wantErr(t, b.do("GET", "/api/agents/me", req{token: w.ra1.RunToken}), 401, clasp.CodeUnauthenticated, "")
	var rb clasp.Run
	b.must(http.StatusOK, "GET", "/api/runs/"+w.rb.ID, req{}, &rb)
	if rb.Status != clasp.RunRunning {
		t.Errorf("B's run: got %s, want running", rb.Status)
	}
}

// TestRequireRunTokenHeartbeatAndFinish: with --require-run-token, a run's
// heartbeat and finish still took the agent API key. Now they take only
// the run's token from an agent; the board still finishes any run.
func TestRequireRunTokenHeartbeatAndFinish(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOpts) { o.requireRunToken = true })
	w := b.world("RF")
	hb := "/api/runs/" + w.ra1.ID + "/heartbeat"
	fin := "/api/runs/" + w.ra1.ID + "/finish"
	done := map[string]any{"status": "succeeded"}
	wantErr(t, b.do("POST", hb, req{token: w.ka}), 401, clasp.CodeUnauthenticated, "")
	wantErr(t, b.do("POST", hb, req{token: w.ka, run: w.ra1.ID}), 401, clasp.CodeUnauthenticated, "")
	wantErr(t, b.do("POST", fin, req{token: w.ka, body: done}), 401, clasp.CodeUnauthenticated, "")
	wantErr(t, b.do("POST", fin, req{token: w.ka, run: w.ra1.ID, body: done}), 401, clasp.CodeUnauthenticated, "")
	b.must(http.StatusOK, "POST", hb, req{token: w.ra1.RunToken}, nil)
	b.must(http.StatusOK, "POST", fin, req{token: w.ra1.RunToken, body: done}, nil)
	b.must(http.StatusOK, "POST", "/api/runs/"+w.ra2.ID+"/finish", req{body: map[string]any{"status": "cancelled"}}, nil)
}

// TestBodyNeverArrivesAnswers408: a request announcing Content-Length: 100
// and sending 4 bytes hung forever. Now the body read has a deadline
// (Config.BodyReadTimeout) and answers 408 request_timeout, closing the
// connection.
func TestBodyNeverArrivesAnswers408(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOpts) { o.bodyReadTimeout = 300 * time.Millisecond })
	co := b.company("BT")
	conn, err := net.Dial("tcp", b.ts.Listener.Addr().String())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	// A safety net so that a regression fails instead of hanging; the test
	// asserts the answer, not the time it took.
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(conn, "POST /api/companies/%s/issues HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"ti", co.ID, b.ts.Listener.Addr(), b.board)
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("status %d, want 408; body %s", res.StatusCode, body)
	}
	var e errorBody
	if err := json.Unmarshal(body, &e); err != nil || e.Code != clasp.CodeRequestTimeout || e.Details == nil || e.Error == "" {
		t.Errorf("body %s (%v), want a JSON error with code request_timeout", body, err)
	}
	if !res.Close {
		t.Errorf("408 answer keeps the connection open, want Connection: close")
	}
	var issues []*clasp.Issue
	b.must(http.StatusOK, "GET", "/api/companies/"+co.ID+"/issues", req{}, &issues)
	if len(issues) != 0 {
		t.Errorf("%d issues after the timed-out request, want 0", len(issues))
	}
}

// TestPathRunOfOtherCompanyIsNotFound: another company's run id in the path
// of /runs/{id}/heartbeat and /finish answered 422 run_not_found while GET
// /runs/{id} answered 404. A run in the path is a resource by id: 404
// not_found when missing or of another company (SPEC section 2); a run
// named by a header still answers 422 run_not_found.
func TestPathRunOfOtherCompanyIsNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w1 := b.world("PA")
	w2 := b.world("PB")
	const missing = "0b0e2b53-6f42-4d6e-8f0c-2b7c1b9d1c3e"
	for _, id := range []string{w2.ra1.ID, missing} {
		wantErr(t, b.do("GET", "/api/runs/"+id, req{token: w1.ka}), 404, clasp.CodeNotFound, "")
		wantErr(t, b.do("POST", "/api/runs/"+id+"/heartbeat", req{token: w1.ka}), 404, clasp.CodeNotFound, "")
		wantErr(t, b.do("POST", "/api/runs/"+id+"/finish", req{token: w1.ka, body: map[string]any{"status": "cancelled"}}), 404, clasp.CodeNotFound, "")
		wantErr(t, b.do("GET", "/api/agents/me", req{token: w1.ka, run: id}), 422, clasp.CodeRunNotFound, "")
	}
	wantErr(t, b.do("POST", "/api/runs/"+missing+"/finish", req{body: map[string]any{"status": "cancelled"}}), 404, clasp.CodeNotFound, "")
	var r clasp.Run
	b.must(http.StatusOK, "GET", "/api/runs/"+w2.ra1.ID, req{}, &r)
	if r.Status != clasp.RunRunning {
		t.Errorf("the other company's run: got %s, want running (untouched)", r.Status)
	}
}

// TestPageLimitAboveMaxIsRefusedAndSaidSo: a limit outside 1..1000 is a
// 400 naming the field, above 1000 too (a silently clamped page looks like
// the whole answer to a client that asked for more), and the message says
// the range.
func TestPageLimitAboveMaxIsRefusedAndSaidSo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	co := b.company("LM")
	path := "/api/companies/" + co.ID + "/issues?limit="
	for _, v := range []string{"0", "-1", "x", "1001", "5000", "99999999999999999999"} {
		e := wantErr(t, b.do("GET", path+v, req{}), 400, clasp.CodeInvalidRequest, "limit")
		if !strings.Contains(e.Error, "from 1 to 1000") {
			t.Errorf("limit=%s: message %q, want it to say from 1 to 1000", v, e.Error)
		}
	}
	for _, v := range []string{"1", "1000"} {
		b.must(http.StatusOK, "GET", path+v, req{}, nil)
	}
}

// TestRefusedBeforeBodyAnswersAtOnce: a request refused before its body was
// read (bad token, unknown path) while its body never arrives got no
// answer at all, because net/http waited for the rest of the body before
// replying (found by a tester with Content-Length: 100 and 4 bytes sent).
// The refusal now answers at once with Connection: close. The body read
// deadline is 1 hour here, so only the fix can produce the answer.
func TestRefusedBeforeBodyAnswersAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOpts) { o.bodyReadTimeout = time.Hour })
	for _, tc := range []struct {
		name, path, auth string
		status           int
	}{
		{"bad token", "/api/agents/me/claim", "Bearer not-a-token", http.StatusUnauthorized},
		{"no token", "/api/agents/me/claim", "", http.StatusUnauthorized},
		{"unknown path", "/api/nope", "Bearer " + b.board, http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", b.ts.Listener.Addr().String())
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(30 * time.Second)) // fail instead of hanging
			auth := ""
			if tc.auth != "" {
				auth = "Authorization: " + tc.auth + "\r\n"
			}
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"sc",
				tc.path, b.ts.Listener.Addr(), auth)
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("read answer: %v", err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != tc.status || !res.Close {
				t.Errorf("status %d (close %v), want %d with Connection: close; body %s", res.StatusCode, res.Close, tc.status, body)
			}
		})
	}
}
