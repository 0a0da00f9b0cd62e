package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
)

// sanitized is an error body with the request id dropped and every given
// id replaced by "<id>": two refusals that differ only in the id they name
// and their request compare equal.
func sanitized(t *testing.T, r *resp, ids ...string) string {
	t.Helper()
	var e map[string]any
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("body %q is not JSON: %v", r.body, err)
	}
	if d, ok := e["details"].(map[string]any); ok {
		delete(d, "requestId")
	}
	out, _ := json.Marshal(e)
	s := string(out)
	for _, id := range ids {
		s = strings.ReplaceAll(s, id, "<id>")
	}
	return s
}

// TestScopedOperatorSeesOneCompany: an operator token scoped to company C
// lists only C, and every id of company D (company, issue, agent, run,
// comment) answers exactly as an id that does not exist: 404 with the
// same body. Its writes to D are refused the same way; a viewer of C is
// refused every write with a 403 saying the token is read-only.
func TestScopedOperatorSeesOneCompany(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wc, wd := b.world("SCA"), b.world("SCB")
	issD := b.issue(wd.c.ID, map[string]any{"status": "todo"})
	var cm clasp.Comment
	b.must(http.StatusCreated, "POST", "/api/issues/"+issD.ID+"/comments", req{body: map[string]any{"body": "hi"}}, &cm)
	op := b.operatorToken("operator", wc.c.ID)
	viewer := b.operatorToken("viewer", wc.c.ID)
	const unknown = "00000000-0000-4000-8000-00000000abcd"

	for _, tok := range []string{op.Token, viewer.Token} {
		var cos []clasp.Company
		b.must(http.StatusOK, "GET", "/api/companies", req{token: tok}, &cos)
		if len(cos) != 1 || cos[0].ID != wc.c.ID {
			t.Errorf("companies seen by a token scoped to C: got %v, want only %s", cos, wc.c.ID)
		}
	}
	type probe struct {
		method, pattern string // pattern with %s for the id
		id              string // D's id
		body            any
	}
	probes := []probe{
		{"GET", "/api/companies/%s", wd.c.ID, nil},
		{"GET", "/api/companies/%s/issues", wd.c.ID, nil},
		{"GET", "/api/companies/%s/agents", wd.c.ID, nil},
		{"GET", "/api/companies/%s/runs", wd.c.ID, nil},
		{"GET", "/api/companies/%s/activity", wd.c.ID, nil},
		{"GET", "/api/companies/%s/events", wd.c.ID, nil},
		{"POST", "/api/companies/%s/issues", wd.c.ID, map[string]any{"title": "x"}},
		{"GET", "/api/issues/%s", issD.ID, nil},
		{"GET", "/api/issues/%s/comments", issD.ID, nil},
		{"GET", "/api/issues/%s/activity", issD.ID, nil},
		{"GET", "/api/issues/%s/heartbeat-context", issD.ID, nil},
		{"PATCH", "/api/issues/%s", issD.ID, map[string]any{"title": "taken"}},
		{"POST", "/api/issues/%s/checkout", issD.ID, map[string]any{"agentId": wd.a.ID, "expectedStatuses": []string{"todo"}}},
		{"POST", "/api/issues/%s/admin/force-release", issD.ID, map[string]any{"reason": "x"}},
		{"POST", "/api/issues/%s/comments", issD.ID, map[string]any{"body": "x"}},
		{"GET", "/api/agents/%s", wd.a.ID, nil},
		{"GET", "/api/agents/%s/keys", wd.a.ID, nil},
		{"PATCH", "/api/agents/%s", wd.a.ID, map[string]any{"status": "paused"}},
		{"POST", "/api/agents/%s/wakeup", wd.a.ID, map[string]any{}},
		{"GET", "/api/runs/%s", wd.ra1.ID, nil},
		{"GET", "/api/runs/%s/log", wd.ra1.ID, nil},
		{"POST", "/api/runs/%s/cancel", wd.ra1.ID, map[string]any{}},
		{"POST", "/api/runs/%s/finish", wd.ra1.ID, map[string]any{"status": "succeeded"}},
	}
	for _, p := range probes {
		other := b.do(p.method, strings.Replace(p.pattern, "%s", p.id, 1), req{token: op.Token, body: p.body})
		missing := b.do(p.method, strings.Replace(p.pattern, "%s", unknown, 1), req{token: op.Token, body: p.body})
		if other.status != http.StatusNotFound || missing.status != http.StatusNotFound {
			t.Errorf("%s %s as an operator of C: D's id %d, an unknown id %d; want 404 for both; body %s", p.method, p.pattern, other.status, missing.status, other.body)
			continue
		}
		if got, want := sanitized(t, other, p.id), sanitized(t, missing, unknown); got != want {
			t.Errorf("%s %s: D's id answers %s, an unknown id %s; want the same body", p.method, p.pattern, got, want)
		}
	}
	// Nothing of D changed.
	var got clasp.Issue
	b.must(http.StatusOK, "GET", "/api/issues/"+issD.ID, req{}, &got)
	if got.Title != issD.Title || got.Status != clasp.IssueTodo {
		t.Errorf("D's issue after the refused writes: got %+v, want untouched", got)
	}

	// The viewer of C reads C and is refused every write, saying why.
	b.must(http.StatusOK, "GET", "/api/companies/"+wc.c.ID+"/issues", req{token: viewer.Token}, nil)
	res := b.do("POST", "/api/companies/"+wc.c.ID+"/issues", req{token: viewer.Token, body: map[string]any{"title": "no"}})
	if e := res.errBody(t); res.status != http.StatusForbidden || e.Code != clasp.CodeForbidden || !strings.Contains(e.Error, "read-only") {
		t.Errorf("viewer's issue create: got %d %s %q, want 403 forbidden saying the token is read-only", res.status, e.Code, e.Error)
	}
}

// TestOperatorTokensAdmin: the board token of the first start is an admin
// operator token named "board"; only admins manage tokens; an admin
// scoped to one company manages that company's tokens only; the secret is
// shown once and never listed.
func TestOperatorTokensAdmin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wc, wd := b.world("OTA"), b.world("OTB")
	var me operatorOut
	b.must(http.StatusOK, "GET", "/api/operators/me", req{}, &me)
	if me.Name != "board" || me.Role != clasp.RoleAdmin || me.CompanyID != nil || me.ID == nil {
		t.Fatalf("the board token's operator: got %+v, want the admin \"board\" of every company", me)
	}
	admC := b.operatorToken("admin", wc.c.ID)
	if !strings.HasPrefix(admC.Token, "clasp_ot_") || admC.Prefix != admC.Token[:KeyPrefixLen] {
		t.Errorf("new token: got secret %.12s... prefix %q, want clasp_ot_ and its prefix", admC.Token, admC.Prefix)
	}
	var list []clasp.OperatorToken
	b.must(http.StatusOK, "GET", "/api/operators/tokens", req{}, &list)
	if len(list) != 2 || list[0].Name != "board" || list[1].ID != admC.ID {
		t.Errorf("tokens: got %+v, want board then the admin of C", list)
	}
	for _, tk := range list {
		if tk.Token != "" {
			t.Errorf("listed token %s carries its secret", tk.ID)
		}
	}
	// The scoped admin: its company's tokens only.
	res := b.do("POST", "/api/operators/tokens", req{token: admC.Token, body: map[string]any{"name": "x", "role": "viewer", "companyId": wd.c.ID}})
	if res.status != http.StatusNotFound {
		t.Errorf("scoped admin creating a token of D: got %d, want 404", res.status)
	}
	var v clasp.OperatorToken
	b.must(http.StatusCreated, "POST", "/api/operators/tokens", req{token: admC.Token, body: map[string]any{"name": "v", "role": "viewer"}}, &v)
	if v.CompanyID == nil || *v.CompanyID != wc.c.ID {
		t.Errorf("scoped admin's new token: got company %v, want C", v.CompanyID)
	}
	b.must(http.StatusOK, "GET", "/api/operators/tokens", req{token: admC.Token}, &list)
	if len(list) != 2 {
		t.Errorf("scoped admin's list: got %d tokens, want its company's 2", len(list))
	}
	if res := b.do("DELETE", "/api/operators/tokens/"+*me.ID, req{token: admC.Token}); res.status != http.StatusNotFound {
		t.Errorf("scoped admin revoking the board token: got %d, want 404", res.status)
	}
	if res := b.do("POST", "/api/companies", req{token: admC.Token, body: map[string]any{"name": "Nope", "issuePrefix": "NOPE"}}); res.status != http.StatusForbidden {
		t.Errorf("scoped admin creating a company: got %d, want 403", res.status)
	}
	// An expiry in the past is refused; an expired token is refused.
	if res := b.do("POST", "/api/operators/tokens", req{body: map[string]any{"name": "old", "role": "viewer", "expiresAt": time.Now().Add(-time.Hour)}}); res.status != http.StatusBadRequest {
		t.Errorf("expiry in the past: got %d, want 400", res.status)
	}
}

// TestActivityNamesOperator: an activity row written with an operator
// token has actor type board and the token's id as actor id.
func TestActivityNamesOperator(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world("ANO")
	op := b.operatorToken("operator", w.c.ID)
	var iss clasp.Issue
	b.must(http.StatusCreated, "POST", "/api/companies/"+w.c.ID+"/issues", req{token: op.Token, body: map[string]any{"title": "by an operator"}}, &iss)
	var rows []clasp.Activity
	b.must(http.StatusOK, "GET", "/api/issues/"+iss.ID+"/activity", req{}, &rows)
	if len(rows) == 0 || rows[0].ActorType != clasp.ActorBoard || rows[0].ActorID != op.ID {
		t.Fatalf("activity of the issue: got %+v, want actor board %s", rows, op.ID)
	}
}

// openStream opens the event stream of company id with bearer token and
// returns a channel closed when the stream ends.
func openStream(t *testing.T, b *bundle, companyID, token string) <-chan struct{} {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	hr, _ := http.NewRequestWithContext(ctx, "GET", b.ts.URL+"/api/companies/"+companyID+"/events", nil)
	hr.Header.Set("Authorization", "Bearer "+token)
	res, err := b.hc.Do(hr)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("open event stream: %v %v", res, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
		}
	}()
	return done
}

// session opens a board session with operator token tok and returns its secret.
func session(t *testing.T, b *bundle, tok string) string {
	t.Helper()
	var s sessionOut
	b.must(http.StatusCreated, "POST", "/api/sessions", req{token: tok, body: map[string]any{}}, &s)
	if !strings.HasPrefix(s.Session, "clasp_bs_") || s.Session == tok {
		t.Fatalf("session secret %.12s...: want a clasp_bs_ credential", s.Session)
	}
	return s.Session
}

// TestRevokedOperatorTokenEndsEverywhere: once revoked, the token answers
// 401 at once, on this server and on another replica of the same database
// that had just served it, its board sessions end, and its open event
// streams (of the token and of its sessions) end within a second; other
// tokens go on.
func TestRevokedOperatorTokenEndsEverywhere(t *testing.T) {
	t.Parallel()
	b := setup(t)
	replica := setup(t, func(o *setupOpts) { o.store = b.st })
	w := b.world("ROT")
	op := b.operatorToken("operator", "")
	other := b.operatorToken("viewer", "")
	sess := session(t, b, op.Token)
	b.must(http.StatusOK, "GET", "/api/companies", req{token: sess}, nil)
	streams := []<-chan struct{}{openStream(t, b, w.c.ID, op.Token), openStream(t, b, w.c.ID, sess)}
	otherStream := openStream(t, b, w.c.ID, other.Token)

	replica.must(http.StatusOK, "GET", "/api/companies", req{token: op.Token}, nil)
	replica.must(http.StatusOK, "GET", "/api/companies", req{token: sess}, nil)
	b.must(http.StatusOK, "DELETE", "/api/operators/tokens/"+op.ID, req{}, nil)
	revoked := time.Now()
	for name, tok := range map[string]string{"token": op.Token, "session": sess} {
		if res := b.do("GET", "/api/companies", req{token: tok}); res.status != http.StatusUnauthorized {
			t.Errorf("revoked operator's %s: got %d, want 401", name, res.status)
		}
		if res := replica.do("GET", "/api/companies", req{token: tok}); res.status != http.StatusUnauthorized {
			t.Errorf("revoked operator's %s on the other replica: got %d, want 401", name, res.status)
		}
	}
	var wg sync.WaitGroup
	for i, done := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-done:
				if d := time.Since(revoked); d > 1500*time.Millisecond {
					t.Errorf("stream %d ended %v after the revocation, want within ~1 s", i, d)
				}
			case <-time.After(3 * time.Second):
				t.Errorf("stream %d of the revoked token still open after 3 s", i)
			}
		}()
	}
	wg.Wait()
	select {
	case <-otherStream:
		t.Errorf("another token's stream ended")
	default:
	}
	b.must(http.StatusOK, "GET", "/api/companies", req{token: other.Token}, nil)
}

// TestSessionSignOutAndExpiry: signing out ends the session at once (the
// token still works); a session ends after 12 h idle and 7 days after it
// was opened, whatever its use.
func TestSessionSignOutAndExpiry(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	b := setup(t, func(o *setupOpts) { o.now = clock })
	op := b.operatorToken("viewer", "")

	s1 := session(t, b, op.Token)
	b.must(http.StatusOK, "GET", "/api/companies", req{token: s1}, nil)
	if res := b.do("DELETE", "/api/sessions/current", req{token: op.Token}); res.status != http.StatusForbidden {
		t.Errorf("sign-out with a token, no session: got %d, want 403", res.status)
	}
	b.must(http.StatusNoContent, "DELETE", "/api/sessions/current", req{token: s1}, nil)
	if res := b.do("GET", "/api/companies", req{token: s1}); res.status != http.StatusUnauthorized {
		t.Errorf("signed-out session: got %d, want 401", res.status)
	}
	b.must(http.StatusOK, "GET", "/api/companies", req{token: op.Token}, nil)
	if res := b.do("POST", "/api/sessions", req{token: session(t, b, op.Token), body: map[string]any{}}); res.status != http.StatusForbidden {
		t.Errorf("a session opening a session: got %d, want 403", res.status)
	}

	idle := session(t, b, op.Token)
	advance(DefaultSessionIdle - time.Minute)
	b.must(http.StatusOK, "GET", "/api/companies", req{token: idle}, nil) // renews the idle clock
	advance(DefaultSessionIdle - time.Minute)
	b.must(http.StatusOK, "GET", "/api/companies", req{token: idle}, nil)
	advance(DefaultSessionIdle)
	if res := b.do("GET", "/api/companies", req{token: idle}); res.status != http.StatusUnauthorized {
		t.Errorf("session idle for 12 h: got %d, want 401", res.status)
	}

	busy := session(t, b, op.Token)
	for elapsed := time.Duration(0); elapsed < DefaultSessionMaxAge-12*time.Hour; elapsed += 11 * time.Hour {
		advance(11 * time.Hour)
		b.must(http.StatusOK, "GET", "/api/companies", req{token: busy}, nil)
	}
	advance(4 * time.Hour) // 169 h after it was opened, 4 h after its last use
	if res := b.do("GET", "/api/companies", req{token: busy}); res.status != http.StatusUnauthorized {
		t.Errorf("session used every 11 h, after 7 days: got %d, want 401", res.status)
	}
}

// TestAdapterIsAdmins: an operator token of role operator manages agents
// but may not set an adapter (a command the server runs on its host), nor
// may an admin scoped to one company; an admin of every company may.
func TestAdapterIsAdmins(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world("ADA")
	op := b.operatorToken("operator", w.c.ID)
	adapter := map[string]any{"type": "process", "command": "/bin/true"}
	res := b.do("PATCH", "/api/agents/"+w.a.ID, req{token: op.Token, body: map[string]any{"adapter": adapter}})
	if e := res.errBody(t); res.status != http.StatusForbidden || e.Code != clasp.CodeForbidden {
		t.Errorf("operator setting an adapter: got %d %s, want 403 forbidden", res.status, e.Code)
	}
	b.must(http.StatusOK, "PATCH", "/api/agents/"+w.a.ID, req{token: op.Token, body: map[string]any{"role": "reviewer"}}, nil)
	// An admin scoped to the company may not either: the command would
	// run on the server's host, past the company's bounds, and could read
	// every company's data; nor may it create an agent with an adapter.
	scoped := b.operatorToken("admin", w.c.ID)
	res = b.do("PATCH", "/api/agents/"+w.a.ID, req{token: scoped.Token, body: map[string]any{"adapter": adapter}})
	if e := res.errBody(t); res.status != http.StatusForbidden || e.Code != clasp.CodeForbidden {
		t.Errorf("company-scoped admin setting an adapter: got %d %s, want 403 forbidden", res.status, e.Code)
	}
	res = b.do("POST", "/api/companies/"+w.c.ID+"/agents", req{token: scoped.Token, body: map[string]any{"name": "exfil", "adapter": adapter}})
	if e := res.errBody(t); res.status != http.StatusForbidden || e.Code != clasp.CodeForbidden {
		t.Errorf("company-scoped admin creating an agent with an adapter: got %d %s, want 403 forbidden", res.status, e.Code)
	}
	b.must(http.StatusOK, "PATCH", "/api/agents/"+w.a.ID, req{body: map[string]any{"adapter": adapter}}, nil)
}
