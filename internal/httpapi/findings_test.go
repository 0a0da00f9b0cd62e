package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/clasp-dev/clasp"
)

// Regression tests for what the third fresh-eyes tester (README only,
// clean clone) found. Each runs on both stores.

func bothStores(t *testing.T, f func(t *testing.T, b *bundle)) {
	for _, pg := range []bool{false, true} {
		t.Run(map[bool]string{false: "sqlite", true: "postgres"}[pg], func(t *testing.T) {
			t.Parallel()
			f(t, setup(t, func(o *setupOpts) { o.postgres = pg }))
		})
	}
}

// TestRunTokenCannotOpenRunsAfterKeyRevoked: a run token opened new runs,
// each with a new token, so revoking the key that minted the first never
// ended the chain. A run token acts for its own run only (SPEC section 2):
// opening a run with one is 403, before and after the revocation, and the
// revoked key itself is 401.
func TestRunTokenCannotOpenRunsAfterKeyRevoked(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, b *bundle) {
		co := b.company("RV")
		ag, key := b.agent(co.ID, "alpha")
		run := b.run(key)
		wantErr(t, b.do("POST", "/api/agents/me/runs", req{token: run.RunToken, body: map[string]any{}}), http.StatusForbidden, clasp.CodeForbidden, "")
		var keys []clasp.APIKey
		b.must(http.StatusOK, "GET", "/api/agents/"+ag.ID+"/keys", req{}, &keys)
		if len(keys) != 1 {
			t.Fatalf("agent has %d keys, want 1", len(keys))
		}
		b.must(http.StatusOK, "DELETE", "/api/agents/"+ag.ID+"/keys/"+keys[0].ID, req{}, nil)
		wantErr(t, b.do("POST", "/api/agents/me/runs", req{token: run.RunToken, body: map[string]any{}}), http.StatusForbidden, clasp.CodeForbidden, "")
		wantErr(t, b.do("POST", "/api/agents/me/runs", req{token: key, body: map[string]any{}}), http.StatusUnauthorized, clasp.CodeUnauthenticated, "")
	})
}

// TestPausedAgentTakesNoNewWork: a paused agent opened runs, checked out
// and claimed. Now those are 422 precondition_failed naming the status,
// nothing is written, and what it holds it can still finish (release);
// resumed, it works again.
func TestPausedAgentTakesNoNewWork(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, b *bundle) {
		w := b.world("PA")
		held := b.issue(w.c.ID, map[string]any{"title": "held", "status": "todo"})
		free := b.issue(w.c.ID, map[string]any{"title": "free", "status": "todo"})
		if r := b.checkout(held.ID, w.ka, w.ra1.ID, w.a.ID, clasp.IssueTodo); r.status != http.StatusOK {
			t.Fatalf("checkout before the pause: %d", r.status)
		}
		b.must(http.StatusOK, "PATCH", "/api/agents/"+w.a.ID, req{body: map[string]any{"status": "paused"}}, nil)

		e := wantErr(t, b.do("POST", "/api/agents/me/runs", req{token: w.ka, body: map[string]any{}}), http.StatusUnprocessableEntity, clasp.CodePreconditionFailed, "")
		if e.Details["agentStatus"] != "paused" {
			t.Errorf("open run details %v, want agentStatus paused", e.Details)
		}
		wantErr(t, b.checkout(free.ID, w.ka, w.ra1.ID, w.a.ID, clasp.IssueTodo), http.StatusUnprocessableEntity, clasp.CodePreconditionFailed, "")
		wantErr(t, b.do("POST", "/api/agents/me/claim", req{token: w.ra2.RunToken, body: map[string]any{"scope": "any"}}),
			http.StatusUnprocessableEntity, clasp.CodePreconditionFailed, "")
		if got := b.getIssue(free.ID); got.CheckoutRunID != nil || got.Status != clasp.IssueTodo {
			t.Errorf("refused checkout changed the issue: %+v", got)
		}
		b.must(http.StatusOK, "POST", "/api/issues/"+held.ID+"/release", req{token: w.ka, run: w.ra1.ID, body: map[string]any{}}, nil)

		b.must(http.StatusOK, "PATCH", "/api/agents/"+w.a.ID, req{body: map[string]any{"status": "active"}}, nil)
		if r := b.checkout(free.ID, w.ka, w.ra1.ID, w.a.ID, clasp.IssueTodo); r.status != http.StatusOK {
			t.Errorf("checkout after resume: %d %s", r.status, r.body)
		}
	})
}

// TestNULInIssueReferenceIsNotFound: /api/issues/%00 (and identifiers with
// NUL or invalid UTF-8) answered 500 on PostgreSQL, which refuses them in
// text parameters; they name no issue: 404. A wake naming such an issue is
// 400.
func TestNULInIssueReferenceIsNotFound(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, b *bundle) {
		w := b.world("NU")
		for _, ref := range []string{"%00", "NU-%00", "a%00b", "%ff%fe"} {
			wantErr(t, b.do("GET", "/api/issues/"+ref, req{}), http.StatusNotFound, clasp.CodeNotFound, "")
			wantErr(t, b.do("PATCH", "/api/issues/"+ref, req{body: map[string]any{"title": "x"}}), http.StatusNotFound, clasp.CodeNotFound, "")
			wantErr(t, b.do("GET", "/api/issues/"+ref+"/activity", req{}), http.StatusNotFound, clasp.CodeNotFound, "")
			wantErr(t, b.checkout(ref, w.ka, w.ra1.ID, w.a.ID, clasp.IssueTodo), http.StatusNotFound, clasp.CodeNotFound, "")
		}
		wantErr(t, b.do("POST", "/api/agents/"+w.a.ID+"/wakeup", req{body: map[string]any{"issueId": "a\u0000"}}),
			http.StatusBadRequest, clasp.CodeInvalidRequest, "issueId")
	})
}

// TestMalformedQueryIsRefused: ?cursor=%%% was dropped by the query parser
// and answered the first page again; a malformed query string is 400.
func TestMalformedQueryIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	co := b.company("MQ")
	wantErr(t, b.do("GET", "/api/companies/"+co.ID+"/issues?cursor=%%%", req{}), http.StatusBadRequest, clasp.CodeInvalidRequest, "query")
	b.must(http.StatusOK, "GET", "/api/companies/"+co.ID+"/issues?limit=5", req{}, nil)
}

// TestUncleanPathIsJSON404: /api//companies was redirected (307, empty
// body, a POST re-sent by clients that follow it); it is a JSON 404
// naming the clean path.
func TestUncleanPathIsJSON404(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, p := range []string{"/api//companies", "/api/issues//checkout"} {
		e := wantErr(t, b.do("POST", p, req{body: map[string]any{"name": "x"}}), http.StatusNotFound, clasp.CodeNotFound, "")
		if !strings.HasPrefix(e.Details["cleanPath"].(string), "/api/") {
			t.Errorf("%s: details %v, want cleanPath", p, e.Details)
		}
	}
}

// TestRelativeAdapterCommandIsRefused: a relative command was accepted and
// every wake then failed with spawn_failed; it is 400 naming
// adapter.command.
func TestRelativeAdapterCommandIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	co := b.company("RC")
	ag, _ := b.agent(co.ID, "alpha")
	for _, cmd := range []string{"relative/path", "sh"} {
		wantErr(t, b.do("PATCH", "/api/agents/"+ag.ID, req{body: map[string]any{"adapter": map[string]any{"type": "process", "command": cmd}}}),
			http.StatusBadRequest, clasp.CodeInvalidRequest, "adapter.command")
	}
}
