package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func decodeDetails(t testing.TB, a *clasp.Activity) map[string]any {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal(a.Details, &d); err != nil {
		t.Fatalf("activity %d details %q: %v", a.ID, a.Details, err)
	}
	return d
}

func TestAuthMatrix(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world("AU")
	// A revoked key and a terminated agent.
	var k2 clasp.APIKey
	b.must(http.StatusCreated, "POST", "/api/agents/"+w.a.ID+"/keys", req{}, &k2)
	var revoked clasp.APIKey
	b.must(http.StatusOK, "DELETE", "/api/agents/"+w.a.ID+"/keys/"+k2.ID, req{}, &revoked)
	if revoked.RevokedAt == nil || revoked.Token != "" {
		t.Errorf("revoked key %+v: want revokedAt set and no token", revoked)
	}
	gone, kGone := b.agent(w.c.ID, "gone")
	b.must(http.StatusOK, "PATCH", "/api/agents/"+gone.ID, req{body: map[string]any{"status": "terminated"}}, nil)

	for _, tc := range []struct {
		name   string
		method string
		path   string
		r      req
		status int
		code   string
	}{
		{"NoToken", "GET", "/api/companies", req{noAuth: true}, 401, clasp.CodeUnauthenticated},
		{"NoTokenAgentRoute", "GET", "/api/agents/me", req{noAuth: true}, 401, clasp.CodeUnauthenticated},
		{"BadScheme", "GET", "/api/companies", req{headers: map[string]string{"Authorization": "Basic Zm9vOmJhcg=="}, noAuth: true}, 401, clasp.CodeUnauthenticated},
		{"BadToken", "GET", "/api/agents/me", req{token: "not-a-key"}, 401, clasp.CodeUnauthenticated},
		{"BadAgentKey", "GET", "/api/agents/me", req{token: "clasp_ak_nope"}, 401, clasp.CodeUnauthenticated},
		{"BadBoardToken", "GET", "/api/companies", req{token: "clasp_bt_nope"}, 401, clasp.CodeUnauthenticated},
		{"BadRunToken", "GET", "/api/agents/me", req{token: "clasp_rt_nope"}, 401, clasp.CodeUnauthenticated},
		{"RevokedKey", "GET", "/api/agents/me", req{token: k2.Token}, 401, clasp.CodeUnauthenticated},
		{"TerminatedAgent", "GET", "/api/agents/me", req{token: kGone}, 401, clasp.CodeUnauthenticated},
		{"AgentOnBoardRoute", "GET", "/api/companies", req{token: w.ka}, 403, clasp.CodeForbidden},
		{"AgentCreatesCompany", "POST", "/api/companies", req{token: w.ka, body: map[string]any{"name": "x", "issuePrefix": "XX"}}, 403, clasp.CodeForbidden},
		{"AgentCreatesAgent", "POST", "/api/companies/" + w.c.ID + "/agents", req{token: w.ka, body: map[string]any{"name": "x"}}, 403, clasp.CodeForbidden},
		{"AgentPatchesAgent", "PATCH", "/api/agents/" + w.a.ID, req{token: w.ka, body: map[string]any{"status": "active"}}, 403, clasp.CodeForbidden},
		{"AgentCreatesKey", "POST", "/api/agents/" + w.a.ID + "/keys", req{token: w.ka}, 403, clasp.CodeForbidden},
		{"RunTokenOnBoardRoute", "GET", "/api/agents/" + w.a.ID + "/keys", req{token: w.ra1.RunToken}, 403, clasp.CodeForbidden},
		{"BoardOnAgentRoute", "GET", "/api/agents/me", req{}, 403, clasp.CodeForbidden},
		{"BoardHeartbeat", "POST", "/api/runs/" + w.ra1.ID + "/heartbeat", req{}, 403, clasp.CodeForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := b.do(tc.method, tc.path, tc.r)
			wantErr(t, res, tc.status, tc.code, "")
			if tc.status == 401 && res.header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
	// The other key still works, and a run token implies its run.
	var me clasp.Agent
	b.must(http.StatusOK, "GET", "/api/agents/me", req{token: w.ka}, &me)
	if me.ID != w.a.ID {
		t.Errorf("me = %s, want %s", me.ID, w.a.ID)
	}
	i1 := b.issue(w.c.ID, map[string]any{"status": "todo"})
	res := b.checkout(i1.ID, w.ra1.RunToken, "", w.a.ID)
	if res.status != http.StatusOK {
		t.Fatalf("checkout with run token: %d %s", res.status, res.body)
	}
	if got := decode[clasp.Issue](t, res); got.CheckoutRunID == nil || *got.CheckoutRunID != w.ra1.ID {
		t.Errorf("run token checkout holder %v, want %s", got.CheckoutRunID, w.ra1.ID)
	}
	// A run token names its own run only.
	wantErr(t, b.checkout(i1.ID, w.ra1.RunToken, w.ra2.ID, w.a.ID), 403, clasp.CodeForbidden, RunIDHeader)
	wantErr(t, b.do("POST", "/api/runs/"+w.ra2.ID+"/heartbeat", req{token: w.ra1.RunToken}), 403, clasp.CodeForbidden, "")
	wantErr(t, b.do("POST", "/api/runs/"+w.ra2.ID+"/heartbeat", req{token: w.ka, run: w.ra1.ID}), 400, clasp.CodeInvalidRequest, RunIDHeader)
	// Another agent's run in the path.
	wantErr(t, b.do("POST", "/api/runs/"+w.rb.ID+"/heartbeat", req{token: w.ka}), 403, clasp.CodeRunNotOwned, "")
}

func TestRequireRunToken(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOpts) { o.requireRunToken = true })
	w := b.world("RT")
	i1 := b.issue(w.c.ID, map[string]any{"status": "todo"})
	wantErr(t, b.checkout(i1.ID, w.ka, w.ra1.ID, w.a.ID), 401, clasp.CodeUnauthenticated, "")
	if res := b.checkout(i1.ID, w.ra1.RunToken, "", w.a.ID); res.status != http.StatusOK {
		t.Fatalf("checkout with run token: %d %s", res.status, res.body)
	}
	wantErr(t, b.do("PATCH", "/api/issues/"+i1.ID, req{token: w.ka, run: w.ra1.ID, body: map[string]any{"title": "t"}}), 401, clasp.CodeUnauthenticated, "")
	wantErr(t, b.do("POST", "/api/issues/"+i1.ID+"/release", req{token: w.ka, run: w.ra1.ID, body: map[string]any{}}), 401, clasp.CodeUnauthenticated, "")
	b.must(http.StatusOK, "PATCH", "/api/issues/"+i1.ID, req{token: w.ra1.RunToken, body: map[string]any{"title": "t"}}, nil)
	b.must(http.StatusOK, "POST", "/api/issues/"+i1.ID+"/release", req{token: w.ra1.RunToken, body: map[string]any{}}, nil)
	// Reads and comments still accept the key.
	b.must(http.StatusOK, "GET", "/api/issues/"+i1.ID, req{token: w.ka}, nil)
	b.must(http.StatusCreated, "POST", "/api/issues/"+i1.ID+"/comments", req{token: w.ka, run: w.ra1.ID, body: map[string]any{"body": "hi"}}, nil)
}

func TestLocalTrusted(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOpts) { o.localTrusted = true })
	port := b.ts.Listener.Addr().(interface{ String() string }).String()
	_, p, _ := strings.Cut(port, ":")
	for _, host := range []string{"127.0.0.1:" + p, "localhost:" + p, "[::1]:" + p, "localhost", "LOCALHOST:" + p, "127.0.0.2"} {
		t.Run("OK "+host, func(t *testing.T) {
			b.must(http.StatusOK, "GET", "/api/companies", req{noAuth: true, host: host}, nil)
		})
	}
	for _, host := range []string{"evil.example:" + p, "evil.example", "10.0.0.1:" + p, "localhost.evil.example", "[::2]:" + p} {
		t.Run("Refused "+host, func(t *testing.T) {
			wantErr(t, b.do("GET", "/api/companies", req{noAuth: true, host: host}), 403, clasp.CodeForbidden, "")
		})
	}
	// Tokens still work whatever the Host.
	b.must(http.StatusOK, "GET", "/api/companies", req{host: "evil.example"}, nil)
	// A cross-origin browser write is refused; same-origin and non-browser ones pass.
	body := map[string]any{"name": "X", "issuePrefix": "LT"}
	wantErr(t, b.do("POST", "/api/companies", req{noAuth: true, body: body, headers: map[string]string{"Sec-Fetch-Site": "cross-site"}}), 403, clasp.CodeForbidden, "")
	wantErr(t, b.do("POST", "/api/companies", req{noAuth: true, body: body, headers: map[string]string{"Origin": "https://evil.example"}}), 403, clasp.CodeForbidden, "")
	b.must(http.StatusCreated, "POST", "/api/companies", req{noAuth: true, body: body, headers: map[string]string{"Sec-Fetch-Site": "same-origin"}}, nil)
	b.must(http.StatusOK, "GET", "/api/companies", req{noAuth: true, headers: map[string]string{"Sec-Fetch-Site": "cross-site"}}, nil)
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world("ID")
	create := "/api/companies/" + w.c.ID + "/issues"
	key := map[string]string{"Idempotency-Key": "create-1"}
	first := b.must(http.StatusCreated, "POST", create, req{body: map[string]any{"title": "once"}, headers: key}, nil)
	if first.header.Get("Idempotent-Replayed") != "" {
		t.Error("first answer marked as replayed")
	}
	again := b.must(http.StatusCreated, "POST", create, req{body: map[string]any{"title": "once"}, headers: key}, nil)
	if again.header.Get("Idempotent-Replayed") != "true" {
		t.Error("replay not marked Idempotent-Replayed: true")
	}
	if diff := cmp.Diff(decode[clasp.Issue](t, first), decode[clasp.Issue](t, again)); diff != "" {
		t.Errorf("replay differs (-first +replay):\n%s", diff)
	}
	wantErr(t, b.do("POST", create, req{body: map[string]any{"title": "other"}, headers: key}), 422, clasp.CodeIdempotencyKeyReused, "")
	// Keys are per actor: an agent's same key is another request.
	b.must(http.StatusCreated, "POST", create, req{token: w.ka, body: map[string]any{"title": "once"}, headers: key}, nil)
	var issues []*clasp.Issue
	b.must(http.StatusOK, "GET", create, req{}, &issues)
	if len(issues) != 2 {
		t.Errorf("%d issues, want 2", len(issues))
	}
	// A failed first request does not hold the key.
	bad := map[string]string{"Idempotency-Key": "create-2"}
	wantErr(t, b.do("POST", create, req{body: map[string]any{"title": "x", "assigneeAgentId": "0b0e2b53-6f42-4d6e-8f0c-2b7c1b9d1c3e"}, headers: bad}), 422, clasp.CodePreconditionFailed, "assigneeAgentId")
	b.must(http.StatusCreated, "POST", create, req{body: map[string]any{"title": "x"}, headers: bad}, nil)
	// Comments and runs.
	iss := issues[0]
	ck := map[string]string{"Idempotency-Key": "comment-1"}
	c1 := b.must(http.StatusCreated, "POST", "/api/issues/"+iss.ID+"/comments", req{token: w.ka, run: w.ra1.ID, body: map[string]any{"body": "done"}, headers: ck}, nil)
	c2 := b.must(http.StatusCreated, "POST", "/api/issues/"+iss.ID+"/comments", req{token: w.ka, run: w.ra1.ID, body: map[string]any{"body": "done"}, headers: ck}, nil)
	if string(c1.body) != string(c2.body) {
		t.Errorf("comment replay %s, want %s", c2.body, c1.body)
	}
	var comments []*clasp.Comment
	b.must(http.StatusOK, "GET", "/api/issues/"+iss.ID+"/comments", req{}, &comments)
	if len(comments) != 1 {
		t.Errorf("%d comments, want 1", len(comments))
	}
	rk := map[string]string{"Idempotency-Key": "run-1"}
	r1 := b.must(http.StatusCreated, "POST", "/api/agents/me/runs", req{token: w.kb, body: map[string]any{}, headers: rk}, nil)
	r2 := b.must(http.StatusCreated, "POST", "/api/agents/me/runs", req{token: w.kb, body: map[string]any{}, headers: rk}, nil)
	if decode[clasp.Run](t, r1).ID != decode[clasp.Run](t, r2).ID {
		t.Error("run open replay opened a second run")
	}
	wantErr(t, b.do("POST", create, req{body: map[string]any{"title": "x"}, headers: map[string]string{"Idempotency-Key": strings.Repeat("k", 300)}}), 400, clasp.CodeInvalidRequest, "Idempotency-Key")
}

// TestIdempotencyKeyPatch: PATCH /api/issues/{id} honours Idempotency-Key
// (issue: an agent's PATCH {status: done, comment} committed after its
// replica was killed, the agent re-sent it to another replica, and the
// result comment was written twice). A repeat answers 200 with
// Idempotent-Replayed: true and writes nothing; another body with the same
// key answers 422 idempotency_key_reused. On both stores.
func TestIdempotencyKeyPatch(t *testing.T) {
	t.Parallel()
	for _, pg := range []bool{false, true} {
		t.Run(map[bool]string{false: "sqlite", true: "postgres"}[pg], func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(o *setupOpts) { o.postgres = pg })
			w := b.world("IP")
			iss := b.issue(w.c.ID, map[string]any{"title": "t", "status": "todo", "assigneeAgentId": w.a.ID})
			b.must(http.StatusOK, "POST", "/api/issues/"+iss.ID+"/checkout", req{token: w.ka, run: w.ra1.ID,
				body: map[string]any{"agentId": w.a.ID, "expectedStatuses": []string{"todo"}}}, nil)
			key := map[string]string{"Idempotency-Key": "done-" + w.ra1.ID + "-" + iss.ID}
			done := req{token: w.ka, run: w.ra1.ID, body: map[string]any{"status": "done", "comment": "result"}, headers: key}
			first := b.must(http.StatusOK, "PATCH", "/api/issues/"+iss.ID, done, nil)
			if first.header.Get("Idempotent-Replayed") != "" {
				t.Error("first PATCH marked as replayed")
			}
			again := b.must(http.StatusOK, "PATCH", "/api/issues/"+iss.ID, done, nil)
			if again.header.Get("Idempotent-Replayed") != "true" {
				t.Error("repeated PATCH not marked Idempotent-Replayed: true")
			}
			if diff := cmp.Diff(decode[clasp.Issue](t, first), decode[clasp.Issue](t, again)); diff != "" {
				t.Errorf("replay differs (-first +replay):\n%s", diff)
			}
			var comments []*clasp.Comment
			b.must(http.StatusOK, "GET", "/api/issues/"+iss.ID+"/comments", req{}, &comments)
			if len(comments) != 1 {
				t.Errorf("%d comments, want 1", len(comments))
			}
			rows := b.activity(iss.ID)
			if n, m := countAction(rows, clasp.ActionIssueUpdated), countAction(rows, clasp.ActionIssueCommented); n != 1 || m != 1 {
				t.Errorf("%d issue.updated and %d issue.commented rows, want 1 each", n, m)
			}
			other := done
			other.body = map[string]any{"status": "done", "comment": "another result"}
			wantErr(t, b.do("PATCH", "/api/issues/"+iss.ID, other), 422, clasp.CodeIdempotencyKeyReused, "Idempotency-Key")
		})
	}
}

var linkRE = regexp.MustCompile(`^<([^>]+)>; rel="next"$`)

func TestPaginationLink(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world("PG")
	for i := 0; i < 5; i++ {
		b.issue(w.c.ID, map[string]any{"title": fmt.Sprintf("issue %d", i), "status": "todo"})
	}
	path := "/api/companies/" + w.c.ID + "/issues?limit=2&status=todo"
	var seen []string
	for pages := 0; path != ""; pages++ {
		if pages > 5 {
			t.Fatal("too many pages")
		}
		var page []*clasp.Issue
		res := b.must(http.StatusOK, "GET", path, req{token: w.ka}, &page)
		for _, iss := range page {
			seen = append(seen, iss.Identifier)
		}
		path = ""
		if l := res.header.Get("Link"); l != "" {
			m := linkRE.FindStringSubmatch(l)
			if m == nil {
				t.Fatalf("Link %q is not <url>; rel=\"next\"", l)
			}
			if !strings.Contains(m[1], "status=todo") || !strings.Contains(m[1], "limit=2") {
				t.Errorf("Link %q lost the query", l)
			}
			path = m[1]
		}
	}
	want := []string{"PG-5", "PG-4", "PG-3", "PG-2", "PG-1"}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("pages (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"limit=0", "limit=-1", "limit=abc", "limit=1.5"} {
		wantErr(t, b.do("GET", "/api/companies/"+w.c.ID+"/issues?"+bad, req{}), 400, clasp.CodeInvalidRequest, "limit")
	}
	wantErr(t, b.do("GET", "/api/companies/"+w.c.ID+"/issues?status=doing", req{}), 400, clasp.CodeInvalidRequest, "status")
	wantErr(t, b.do("GET", "/api/companies/"+w.c.ID+"/issues?limit=5000", req{}), 400, clasp.CodeInvalidRequest, "limit")
	// Empty lists are [] and bare arrays.
	res := b.must(http.StatusOK, "GET", "/api/companies/"+w.c.ID+"/issues?status=blocked", req{}, nil)
	if strings.TrimSpace(string(res.body)) != "[]" {
		t.Errorf("empty list body %q, want []", res.body)
	}
	// Comments page with after.
	iss := b.issue(w.c.ID, nil)
	for i := 0; i < 3; i++ {
		b.must(http.StatusCreated, "POST", "/api/issues/"+iss.ID+"/comments", req{body: map[string]any{"body": fmt.Sprint(i)}}, nil)
	}
	// Newest first by default (as Paperclip), oldest first with order=asc;
	// the next page's cursor continues in the list's own order.
	for _, tc := range []struct{ query, page1, page2 string }{
		{"", "2,1", "0"}, {"&order=desc", "2,1", "0"}, {"&order=asc", "0,1", "2"},
	} {
		var cs []*clasp.Comment
		res = b.must(http.StatusOK, "GET", "/api/issues/"+iss.ID+"/comments?limit=2"+tc.query, req{}, &cs)
		m := linkRE.FindStringSubmatch(res.header.Get("Link"))
		if got := commentBodies(cs); got != tc.page1 || m == nil {
			t.Fatalf("comments%s page 1: %s, Link %q; want %s and a next link", tc.query, got, res.header.Get("Link"), tc.page1)
		}
		b.must(http.StatusOK, "GET", m[1], req{}, &cs)
		if got := commentBodies(cs); got != tc.page2 {
			t.Errorf("comments%s page 2: %s, want %s", tc.query, got, tc.page2)
		}
	}
}

// commentBodies joins the bodies of cs with commas.
func commentBodies(cs []*clasp.Comment) string {
	bodies := make([]string, len(cs))
	for i, c := range cs {
		bodies[i] = c.Body
	}
	return strings.Join(bodies, ",")
}

func TestHealthReadyMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.must(http.StatusOK, "GET", "/healthz", req{noAuth: true}, nil)
	b.must(http.StatusOK, "GET", "/readyz", req{noAuth: true}, nil)
	w := b.world("HM")
	i1 := b.issue(w.c.ID, map[string]any{"status": "todo"})
	b.checkout(i1.ID, w.ka, w.ra1.ID, w.a.ID)
	b.checkout(i1.ID, w.ka, w.ra1.ID, w.a.ID)
	b.checkout(i1.ID, w.ka, w.ra2.ID, w.a.ID)
	res := b.must(http.StatusOK, "GET", "/metrics", req{noAuth: true}, nil)
	text := string(res.body)
	for _, want := range []string{
		`clasp_checkouts_total{outcome="ok"} 1`,
		`clasp_checkouts_total{outcome="same_run"} 1`,
		`clasp_checkouts_total{outcome="conflict"} 1`,
		`clasp_checkout_conflicts_total{reason="held_by_live_run"} 1`,
		`clasp_lock_adoptions_total`,
		`clasp_sweeps_total`,
		`clasp_sweep_runs_expired_total`,
		`clasp_sweep_locks_cleared_total`,
		`clasp_http_request_duration_seconds_count{code="200",method="POST",route="/api/issues/{id}/checkout"} 2`,
		`route="/api/companies/{companyId}/issues"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(text, i1.ID) {
		t.Error("/metrics labels contain a raw path")
	}
	b.srv.BeginShutdown()
	wantErr(t, b.do("GET", "/readyz", req{noAuth: true}), 503, clasp.CodeUnavailable, "")
	b.must(http.StatusOK, "GET", "/healthz", req{noAuth: true}, nil)
}

func TestNotFoundAndMethodNotAllowed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wantErr(t, b.do("GET", "/api/nothing/here", req{}), 404, clasp.CodeNotFound, "")
	wantErr(t, b.do("GET", "/api/issues/X-1/nothing", req{}), 404, clasp.CodeNotFound, "")
	res := b.do("DELETE", "/api/issues/X-1", req{})
	wantErr(t, res, 405, clasp.CodeMethodNotAllowed, "")
	if allow := res.header.Get("Allow"); !strings.Contains(allow, "GET") || !strings.Contains(allow, "PATCH") {
		t.Errorf("Allow %q, want GET and PATCH", allow)
	}
	res = b.do("PUT", "/api/companies", req{})
	wantErr(t, res, 405, clasp.CodeMethodNotAllowed, "")
	// Ids that cannot be ids (400), and ids of nothing (404).
	wantErr(t, b.do("GET", "/api/companies/nope", req{}), 400, clasp.CodeInvalidRequest, "companyId")
	wantErr(t, b.do("GET", "/api/companies/0b0e2b53-6f42-4d6e-8f0c-2b7c1b9d1c3e/issues", req{}), 404, clasp.CodeNotFound, "")
	wantErr(t, b.do("GET", "/api/runs/nope", req{}), 400, clasp.CodeInvalidRequest, "id")
	wantErr(t, b.do("GET", "/api/agents/0b0e2b53-6f42-4d6e-8f0c-2b7c1b9d1c3e", req{}), 404, clasp.CodeNotFound, "")
	wantErr(t, b.do("GET", "/api/issues/NOPE-1", req{}), 404, clasp.CodeNotFound, "")
}

func TestRunsAndHeartbeat(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOpts) { o.leaseTTL = time.Hour })
	w := b.world("RH")
	if w.ra1.LeaseExpiresAt == nil || time.Until(*w.ra1.LeaseExpiresAt) < 50*time.Minute {
		t.Errorf("opened run lease %v, want about an hour ahead", w.ra1.LeaseExpiresAt)
	}
	var hb clasp.Run
	b.must(http.StatusOK, "POST", "/api/runs/"+w.ra1.ID+"/heartbeat", req{token: w.ka}, &hb)
	if hb.ID != w.ra1.ID || hb.LeaseExpiresAt == nil || hb.LeaseExpiresAt.Before(*w.ra1.LeaseExpiresAt) {
		t.Errorf("heartbeat gave %+v; want the run with a renewed lease", hb)
	}
	b.must(http.StatusOK, "POST", "/api/runs/"+w.ra1.ID+"/heartbeat", req{token: w.ra1.RunToken, raw: []byte("{}")}, nil)
	b.must(http.StatusOK, "POST", "/api/runs/"+w.ra1.ID+"/heartbeat", req{token: w.ka, run: w.ra1.ID, runHdr: PaperclipRunIDHdr}, nil)
	var runs []*clasp.Run
	b.must(http.StatusOK, "GET", "/api/companies/"+w.c.ID+"/runs?status=running&agentId="+w.a.ID, req{token: w.kb}, &runs)
	if len(runs) != 2 {
		t.Errorf("%d running runs of A, want 2", len(runs))
	}
	// The board finishes any run.
	var fin clasp.Run
	b.must(http.StatusOK, "POST", "/api/runs/"+w.rb.ID+"/finish", req{body: map[string]any{"status": "cancelled"}}, &fin)
	if fin.Status != clasp.RunCancelled {
		t.Errorf("board finish gave %s", fin.Status)
	}
	// Opening a run on an issue of another company is not possible.
	wantErr(t, b.do("POST", "/api/agents/me/runs", req{token: w.ka, body: map[string]any{"issueId": "NOPE-1"}}), 404, clasp.CodeNotFound, "")
	// Inbox: assigned, todo/in_progress/blocked.
	i1 := b.issue(w.c.ID, map[string]any{"status": "todo", "assigneeAgentId": w.a.ID})
	b.issue(w.c.ID, map[string]any{"status": "backlog", "assigneeAgentId": w.a.ID})
	var inbox []*clasp.InboxItem
	b.must(http.StatusOK, "GET", "/api/agents/me/inbox-lite", req{token: w.ka, run: w.ra1.ID}, &inbox)
	if len(inbox) != 1 || inbox[0].ID != i1.ID {
		t.Errorf("inbox %+v, want just %s", inbox, i1.Identifier)
	}
}

func TestPatchRules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world("PR")
	i1 := b.issue(w.c.ID, map[string]any{"status": "todo"})
	wantErr(t, b.do("PATCH", "/api/issues/"+i1.ID, req{token: w.ka, body: map[string]any{"title": "x"}}), 401, clasp.CodeRunIDRequired, "")
	wantErr(t, b.do("PATCH", "/api/issues/"+i1.ID, req{token: w.ka, run: w.ra1.ID, body: map[string]any{"status": "in_progress"}}), 422, clasp.CodePreconditionFailed, "status")
	wantErr(t, b.do("PATCH", "/api/issues/"+i1.ID, req{body: map[string]any{}}), 400, clasp.CodeInvalidRequest, "")
	wantErr(t, b.do("PATCH", "/api/issues/"+i1.ID, req{body: map[string]any{"assigneeAgentId": 7}}), 400, clasp.CodeInvalidRequest, "assigneeAgentId")
	wantErr(t, b.do("PATCH", "/api/issues/"+i1.ID, req{body: map[string]any{"comment": ""}}), 400, clasp.CodeInvalidRequest, "comment")
	// The board sets in_progress only with an assignee (rule L5).
	wantErr(t, b.do("PATCH", "/api/issues/"+i1.ID, req{body: map[string]any{"status": "in_progress"}}), 422, clasp.CodePreconditionFailed, "")
	sameIssue(t, i1, b.getIssue(i1.ID))
	// The holder records its result and finishes in one write.
	if res := b.checkout(i1.Identifier, w.ka, w.ra1.ID, w.a.ID); res.status != http.StatusOK {
		t.Fatalf("checkout: %d %s", res.status, res.body)
	}
	var got clasp.Issue
	b.must(http.StatusOK, "PATCH", "/api/issues/"+strings.ToLower(i1.Identifier), req{token: w.ka, run: w.ra1.ID, body: map[string]any{"status": "done", "comment": "sha256: abc"}}, &got)
	if got.Status != clasp.IssueDone || got.CheckoutRunID != nil {
		t.Errorf("after PATCH done: %+v", got)
	}
	var cs []*clasp.Comment
	b.must(http.StatusOK, "GET", "/api/issues/"+i1.ID+"/comments", req{token: w.kb}, &cs)
	if len(cs) != 1 || cs[0].Body != "sha256: abc" || cs[0].AuthorAgentID == nil || *cs[0].AuthorAgentID != w.a.ID {
		t.Errorf("comments %+v, want the result by A", cs)
	}
	// Unassign with null.
	b.must(http.StatusOK, "PATCH", "/api/issues/"+i1.ID, req{raw: []byte(`{"assigneeAgentId":null}`)}, &got)
	if got.AssigneeAgentID != nil {
		t.Errorf("assignee %v after null, want none", *got.AssigneeAgentID)
	}
}

// failingStore is a real store whose settings and ping fail, to exercise
// the 500 and 503 paths.
type failingStore struct {
	store.Store
}

func (failingStore) SettingGet(context.Context, string) (string, error) {
	return "", errors.New("disk on fire")
}

func (failingStore) Ping(context.Context) error { return errors.New("disk on fire") }

func TestInternalErrorsAndPanics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var logs bytes.Buffer
	var mu sync.Mutex
	srv := New(Config{Store: failingStore{b.st}, Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil)), Registry: prometheus.NewRegistry()})
	srv.mux.HandleFunc("GET /api/test-panic", func(http.ResponseWriter, *http.Request) { panic("kaboom") })
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	get := func(path string, auth bool) (int, string) {
		hr, _ := http.NewRequest("GET", ts.URL+path, nil)
		if auth {
			hr.Header.Set("Authorization", "Bearer "+b.board)
		}
		res, err := ts.Client().Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, strings.TrimSpace(string(body))
	}
	// The body says nothing but the request id, which matches the log line.
	want500 := regexp.MustCompile(`^\{"error":"internal error","code":"internal","details":\{"requestId":"[0-9a-f-]{36}"\}\}$`)
	if st, body := get("/api/companies", true); st != 500 || !want500.MatchString(body) {
		t.Errorf("store failure answered %d %s, want 500 %s", st, body, want500)
	}
	if st, body := get("/api/test-panic", false); st != 500 || !want500.MatchString(body) {
		t.Errorf("panic answered %d %s, want 500 %s", st, body, want500)
	}
	if st, _ := get("/readyz", false); st != 503 {
		t.Errorf("/readyz with a failing database answered %d, want 503", st)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"disk on fire", "kaboom", "goroutine"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// testClock is a settable clock shared by store and server.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestShortLeaseRenewedByRequests: with a lease TTL under 3 s, an ordinary
// request naming the run still renews its lease (RULES.md, Leases), because
// the renewal window shrinks to a third of the TTL.
func TestShortLeaseRenewedByRequests(t *testing.T) {
	t.Parallel()
	clk := &testClock{t: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)}
	const ttl = 900 * time.Millisecond
	b := setup(t, func(o *setupOpts) { o.leaseTTL = ttl; o.now = clk.Now })
	c := b.company("SH")
	_, key := b.agent(c.ID, "short")
	r := b.run(key)
	// Within the window: no write.
	clk.Advance(100 * time.Millisecond)
	b.must(http.StatusOK, "GET", "/api/agents/me", req{token: key, run: r.ID}, nil)
	var got clasp.Run
	b.must(http.StatusOK, "GET", "/api/runs/"+r.ID, req{}, &got)
	if !got.LeaseExpiresAt.Equal(*r.LeaseExpiresAt) {
		t.Errorf("lease %v after a request 100ms in, want unchanged %v", got.LeaseExpiresAt, r.LeaseExpiresAt)
	}
	// Past a third of the TTL: renewed to now + TTL + the window (a
	// request the next window skips is still covered for a full TTL).
	clk.Advance(300 * time.Millisecond)
	b.must(http.StatusOK, "GET", "/api/agents/me", req{token: key, run: r.ID}, nil)
	b.must(http.StatusOK, "GET", "/api/runs/"+r.ID, req{}, &got)
	if want := clk.Now().Add(ttl + ttl/3); !got.LeaseExpiresAt.Equal(want) {
		t.Errorf("lease %v after a request 400ms in, want %v", got.LeaseExpiresAt, want)
	}
}

// TestSkippedRenewalNeverShortensLease: a run (TTL 3 s) sends a request
// 0.91 s after opening (inside the 1 s window, so no write) and another
// 2.5 s after that: it is still live, because the lease lasts a full TTL
// after the last request (RULES.md, Leases): each write grants TTL + the
// window. It still ends: past TTL + window after the last write the run
// is not live.
func TestSkippedRenewalNeverShortensLease(t *testing.T) {
	t.Parallel()
	clk := &testClock{t: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)}
	const ttl = 3 * time.Second
	b := setup(t, func(o *setupOpts) { o.leaseTTL = ttl; o.now = clk.Now })
	c := b.company("SK")
	_, key := b.agent(c.ID, "skip")
	r := b.run(key)
	clk.Advance(910 * time.Millisecond)
	b.must(http.StatusOK, "GET", "/api/agents/me", req{token: key, run: r.ID}, nil) // skipped: inside the window
	clk.Advance(2500 * time.Millisecond)
	b.must(http.StatusOK, "GET", "/api/agents/me", req{token: key, run: r.ID}, nil) // 2.5 s after a sign of life: live
	var got clasp.Run
	b.must(http.StatusOK, "GET", "/api/runs/"+r.ID, req{}, &got)
	if want := clk.Now().Add(ttl + time.Second); !got.LeaseExpiresAt.Equal(want) {
		t.Errorf("lease %v, want renewed to %v", got.LeaseExpiresAt, want)
	}
	clk.Advance(ttl + time.Second + time.Millisecond)
	wantErr(t, b.do("GET", "/api/agents/me", req{token: key, run: r.ID}), http.StatusConflict, clasp.CodeRunNotLive, "")
}

// TestS24_AdoptionCountedInMetrics: a run whose lease lapsed (its process
// died) holds I1; the same agent's new run checks it out at once by
// adoption (rules L1/L3, scenario S24 before any sweep), and
// clasp_lock_adoptions_total counts it.
func TestS24_AdoptionCountedInMetrics(t *testing.T) {
	t.Parallel()
	clk := &testClock{t: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)}
	const ttl = 10 * time.Second
	b := setup(t, func(o *setupOpts) { o.leaseTTL = ttl; o.now = clk.Now })
	c := b.company("AD")
	a, key := b.agent(c.ID, "adopter")
	i1 := b.issue(c.ID, map[string]any{"status": "todo"})
	r1 := b.run(key)
	b.checkout(i1.ID, key, r1.ID, a.ID)
	clk.Advance(ttl + time.Second) // R1 is lost: no sign of life for the TTL
	r2 := b.run(key)
	got := decode[clasp.Issue](t, b.checkout(i1.ID, key, r2.ID, a.ID))
	if deref(got.CheckoutRunID) != r2.ID || got.CheckoutEpoch != 2 {
		t.Fatalf("after adoption: checkoutRunId %q epoch %d, want %q and 2", deref(got.CheckoutRunID), got.CheckoutEpoch, r2.ID)
	}
	text := string(b.must(http.StatusOK, "GET", "/metrics", req{noAuth: true}, nil).body)
	for _, want := range []string{"clasp_lock_adoptions_total 1", `clasp_checkouts_total{outcome="ok"} 2`} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
