package httpapi

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
	"github.com/prometheus/client_golang/prometheus"
)

// Idempotency-Key: replays of creates and run opens.

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

// TestIdempotencyKeyCrashAfterCreateReplays: an Idempotency-Key is
// recorded in the transaction that creates the issue, so when the server
// dies after that commit and before it answers, the retry answers the
// issue created, replayed (Idempotent-Replayed: true), and creates
// nothing.
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
