package httpapi

// The security suite of the HTTP API: one test per promise about abuse
// limits, request ids, revocation and answers that leak nothing. Each runs
// the real handler on a loopback listener over a real store; those whose
// promise involves the database run on SQLite and PostgreSQL.

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/clasp-dev/clasp"
)

// eachStore runs fn as a subtest on SQLite and on PostgreSQL (skipped
// without CLASP_TEST_POSTGRES_URL).
func eachStore(t *testing.T, fn func(t *testing.T, pg bool)) {
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); fn(t, false) })
	t.Run("postgres", func(t *testing.T) { t.Parallel(); fn(t, true) })
}

func onPG(pg bool) func(*setupOpts) { return func(o *setupOpts) { o.postgres = pg } }

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSecurityRequestID: every answer carries X-Request-Id (a valid
// incoming one kept, an invalid one replaced by a new UUID), error bodies
// carry it in details.requestId, and every activity row a request writes
// stores it and shows it in the activity API.
func TestSecurityRequestID(t *testing.T) {
	eachStore(t, func(t *testing.T, pg bool) {
		b := setup(t, onPG(pg))
		co := b.company("RQ")
		res := b.do("POST", "/api/companies/"+co.ID+"/issues", req{body: map[string]any{"title": "t"}, headers: map[string]string{RequestIDHeader: "trace-abc.123"}})
		if res.status != 201 || res.header.Get(RequestIDHeader) != "trace-abc.123" {
			t.Fatalf("create: %d, X-Request-Id %q; want 201 and the incoming id", res.status, res.header.Get(RequestIDHeader))
		}
		iss := decode[clasp.Issue](t, res)
		rows := b.activity(iss.ID)
		if len(rows) != 1 || rows[0].RequestID == nil || *rows[0].RequestID != "trace-abc.123" {
			t.Fatalf("activity of the create: %+v; want one row with requestId trace-abc.123", rows)
		}
		// A checkout by an agent writes its row with its own request's id.
		_, key := b.agent(co.ID, "rq-agent")
		run := b.run(key)
		b.must(http.StatusOK, "PATCH", "/api/issues/"+iss.ID, req{body: map[string]any{"status": "todo"}}, nil)
		ck := b.do("POST", "/api/issues/"+iss.ID+"/checkout", req{token: key, run: run.ID, body: map[string]any{"agentId": run.AgentID, "expectedStatuses": []string{"todo"}}})
		if ck.status != 200 {
			t.Fatalf("checkout: %d %s", ck.status, ck.body)
		}
		made := ck.header.Get(RequestIDHeader)
		if _, ok := parseUUID(made); !ok {
			t.Fatalf("checkout without X-Request-Id answered X-Request-Id %q, want a new UUID", made)
		}
		var found bool
		for _, a := range b.activity(iss.ID) {
			if a.Action == clasp.ActionIssueCheckedOut {
				found = a.RequestID != nil && *a.RequestID == made
			}
		}
		if !found {
			t.Errorf("the checked_out row does not carry the checkout's request id %s", made)
		}
		// Invalid ids are replaced; error bodies carry the id.
		for _, bad := range []string{"has space", strings.Repeat("x", 129), "semi;colon"} {
			r := b.do("GET", "/api/issues/"+iss.ID+"x", req{headers: map[string]string{RequestIDHeader: bad}})
			got := r.header.Get(RequestIDHeader)
			if got == bad {
				t.Errorf("invalid X-Request-Id %q was echoed", bad)
			}
			e := r.errBody(t)
			if e.Details["requestId"] != got || got == "" {
				t.Errorf("error body details.requestId %v, header %q: want them equal and set", e.Details["requestId"], got)
			}
		}
	})
}

// TestSecurityNosniffOnEveryAnswer: X-Content-Type-Options: nosniff on
// JSON answers, errors, /healthz, /metrics, the text run log and the event
// stream alike.
func TestSecurityNosniffOnEveryAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	co := b.company("NS")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, _ := b.openStream(ctx, "/api/companies/"+co.ID+"/events", "", nil)
	if res.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("event stream: X-Content-Type-Options %q", res.Header.Get("X-Content-Type-Options"))
	}
	cancel()
	for _, p := range []string{"/healthz", "/metrics", "/api/companies", "/api/nope", "/api/runs/" + co.ID + "/log"} {
		r := b.do("GET", p, req{})
		if r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s (%d): X-Content-Type-Options %q, want nosniff", p, r.status, r.header.Get("X-Content-Type-Options"))
		}
	}
}

// TestSecurityHeaderTooLarge: a request header over 64 KiB answers 431
// headers_too_large as a JSON error body (net/http's own default is 1 MiB).
func TestSecurityHeaderTooLarge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do("GET", "/api/companies", req{headers: map[string]string{"X-Padding": strings.Repeat("a", 80<<10)}})
	wantErr(t, r, http.StatusRequestHeaderFieldsTooLarge, clasp.CodeHeaderTooLarge, "")
	if r.header.Get("Content-Type") != "application/json" {
		t.Errorf("431 Content-Type %q, want application/json", r.header.Get("Content-Type"))
	}
	b.must(http.StatusOK, "GET", "/api/companies", req{headers: map[string]string{"X-Padding": strings.Repeat("a", 32<<10)}}, nil)
}

// TestSecurityWritesNeedJSONContentType: a write whose body is sent as
// text/plain, a form, multipart, or without a Content-Type answers 415
// unsupported_media_type and writes nothing; application/json (with
// parameters, or a +json type) passes, and a bodiless write needs no
// Content-Type. Both in token and local-trusted mode (where a browser
// could otherwise post such bodies cross-site without a preflight).
func TestSecurityWritesNeedJSONContentType(t *testing.T) {
	t.Parallel()
	for _, local := range []bool{false, true} {
		b := setup(t, func(o *setupOpts) { o.localTrusted = local })
		co := b.company(map[bool]string{false: "CTT", true: "CTL"}[local])
		path := "/api/companies/" + co.ID + "/issues"
		body := []byte(`{"title":"sneaky"}`)
		for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "", "application/jsonx", "text/json"} {
			hr, _ := http.NewRequest("POST", b.ts.URL+path, bytes.NewReader(body))
			if !local {
				hr.Header.Set("Authorization", "Bearer "+b.board)
			}
			if ct != "" {
				hr.Header.Set("Content-Type", ct)
			}
			res, err := b.hc.Do(hr)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusUnsupportedMediaType {
				t.Errorf("local=%v Content-Type %q: status %d, want 415", local, ct, res.StatusCode)
			}
		}
		var list []clasp.Issue
		b.must(http.StatusOK, "GET", path, req{}, &list)
		if len(list) != 0 {
			t.Errorf("local=%v: %d issues written by refused requests", local, len(list))
		}
		for _, ct := range []string{"application/json", "application/json; charset=utf-8", "application/merge-patch+json"} {
			b.must(http.StatusCreated, "POST", path, req{raw: body, headers: map[string]string{"Content-Type": ct}}, nil)
		}
		// A bodiless write (an empty release) needs no Content-Type.
		iss := b.issue(co.ID, nil)
		hr, _ := http.NewRequest("POST", b.ts.URL+"/api/issues/"+iss.ID+"/release", nil)
		if !local {
			hr.Header.Set("Authorization", "Bearer "+b.board)
		}
		res, err := b.hc.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode == http.StatusUnsupportedMediaType {
			t.Errorf("local=%v: a bodiless release answered 415", local)
		}
	}
}

// TestSecurityLimitAbove1000IsRefused: limit=1001 answers 400 naming the
// field on every paged list, instead of a silently shorter page.
func TestSecurityLimitAbove1000IsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world("LI")
	iss := b.issue(w.c.ID, nil)
	for _, p := range []string{
		"/api/companies/" + w.c.ID + "/issues", "/api/companies/" + w.c.ID + "/runs", "/api/companies/" + w.c.ID + "/activity",
		"/api/issues/" + iss.ID + "/activity", "/api/issues/" + iss.ID + "/comments", "/api/companies", "/api/companies/" + w.c.ID + "/agents",
	} {
		wantErr(t, b.do("GET", p+"?limit=1001", req{}), 400, clasp.CodeInvalidRequest, "limit")
		b.must(http.StatusOK, "GET", p+"?limit=1000", req{}, nil)
	}
}

// TestSecurityNotFoundIsOneAnswer: an agent asking for another company's
// object by id gets exactly the answer it gets for an id that exists
// nowhere (status and body, with the id swapped), so an answer never tells
// whether an id exists in another company.
func TestSecurityNotFoundIsOneAnswer(t *testing.T) {
	eachStore(t, func(t *testing.T, pg bool) {
		b := setup(t, onPG(pg))
		w := b.world("NF")
		o := b.world("NG") // another company, with its own agent, run and issue
		theirIssue := b.issue(o.c.ID, nil)
		missing := "0190f000-0000-7000-8000-000000000001"
		for _, tc := range []struct {
			path  string
			their string
		}{
			{"/api/runs/%s", o.ra1.ID},
			{"/api/runs/%s/log", o.ra1.ID},
			{"/api/issues/%s", theirIssue.ID},
			{"/api/issues/%s/comments", theirIssue.ID},
			{"/api/issues/%s/activity", theirIssue.ID},
		} {
			get := func(id string) (int, string) {
				r := b.do("GET", strings.Replace(tc.path, "%s", id, 1), req{token: w.ka})
				e := r.errBody(t)
				return r.status, e.Code + " " + strings.ReplaceAll(e.Error, id, "ID")
			}
			st1, a := get(tc.their)
			st2, m := get(missing)
			if st1 != 404 || st2 != 404 || a != m {
				t.Errorf("%s: another company's object answered %d %q, a missing one %d %q; want one 404 answer", tc.path, st1, a, st2, m)
			}
		}
	})
}

// TestSecurityRateLimitPerAddress: over the per-address bucket a request
// answers 429 rate_limited with Retry-After and RateLimit-* headers; an
// X-Forwarded-For header changes nothing unless the peer is a trusted
// proxy, and then each forwarded client has its own bucket.
func TestSecurityRateLimitPerAddress(t *testing.T) {
	t.Parallel()
	lim := Limits{AddressRate: 0.001, AddressBurst: 3}
	b := setup(t, func(o *setupOpts) { o.limits = lim })
	for i := range 3 {
		r := b.do("GET", "/api/companies", req{headers: map[string]string{"X-Forwarded-For": "203.0.113." + strconv.Itoa(i)}})
		if r.status != 200 {
			t.Fatalf("request %d: %d %s", i, r.status, r.body)
		}
	}
	r := b.do("GET", "/api/companies", req{headers: map[string]string{"X-Forwarded-For": "198.51.100.7"}})
	wantErr(t, r, http.StatusTooManyRequests, clasp.CodeRateLimited, "")
	if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("Retry-After %q, want a positive number of seconds", r.header.Get("Retry-After"))
	}
	if r.header.Get("RateLimit-Limit") != "3" || r.header.Get("RateLimit-Remaining") != "0" || r.header.Get("RateLimit-Reset") == "" {
		t.Errorf("RateLimit headers: limit %q remaining %q reset %q; want 3, 0, set", r.header.Get("RateLimit-Limit"), r.header.Get("RateLimit-Remaining"), r.header.Get("RateLimit-Reset"))
	}
	// /healthz is not limited (load balancers probe it).
	b.must(http.StatusOK, "GET", "/healthz", req{}, nil)

	// Behind a trusted proxy (this test's loopback peer), each forwarded
	// client has its own bucket; spoofed entries left of the proxy's own
	// do not help.
	lim.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	p := setup(t, func(o *setupOpts) { o.limits = lim })
	for i := range 3 {
		p.must(http.StatusOK, "GET", "/api/companies", req{headers: map[string]string{"X-Forwarded-For": "1.2.3." + strconv.Itoa(i) + ", 198.51.100.9"}}, nil)
	}
	wantErr(t, p.do("GET", "/api/companies", req{headers: map[string]string{"X-Forwarded-For": "9.9.9.9, 198.51.100.9"}}), 429, clasp.CodeRateLimited, "")
	p.must(http.StatusOK, "GET", "/api/companies", req{headers: map[string]string{"X-Forwarded-For": "198.51.100.10"}}, nil)
}

// TestSecurityRateLimitPerCredential: one credential over its bucket gets
// 429 while another credential from the same address is served.
func TestSecurityRateLimitPerCredential(t *testing.T) {
	t.Parallel()
	b := setup(t)
	co := b.company("RC")
	_, k1 := b.agent(co.ID, "one")
	_, k2 := b.agent(co.ID, "two")
	l := setup(t, func(o *setupOpts) { o.limits = Limits{CredentialRate: 0.001, CredentialBurst: 2}; o.store = b.st })
	for range 2 {
		l.must(http.StatusOK, "GET", "/api/agents/me", req{token: k1}, nil)
	}
	r := l.do("GET", "/api/agents/me", req{token: k1})
	wantErr(t, r, 429, clasp.CodeRateLimited, "")
	if r.header.Get("Retry-After") == "" {
		t.Errorf("429 without Retry-After")
	}
	l.must(http.StatusOK, "GET", "/api/agents/me", req{token: k2}, nil)
}

// TestSecurityCommentCapPerAgent: an agent writes at most
// CommentsPerAgentMinute comments a minute whatever runs and credentials
// it spreads them over (its key in one run, its key in another run, a
// run token, a second key, no run at all); the next is 429 and is not
// written; another agent of the company is not held back.
func TestSecurityCommentCapPerAgent(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOpts) { o.limits = Limits{CommentsPerAgentMinute: 3} })
	w := b.world("CC")
	iss := b.issue(w.c.ID, nil)
	path := "/api/issues/" + iss.ID + "/comments"
	b.must(http.StatusCreated, "POST", path, req{token: w.ka, run: w.ra1.ID, body: map[string]any{"body": "one"}}, nil)
	b.must(http.StatusCreated, "POST", path, req{token: w.ka, run: w.ra2.ID, body: map[string]any{"body": "two"}}, nil)
	b.must(http.StatusCreated, "POST", path, req{token: w.ra1.RunToken, body: map[string]any{"body": "three"}}, nil)
	var k2 struct {
		Token string `json:"token"`
	}
	b.must(http.StatusCreated, "POST", "/api/agents/"+w.a.ID+"/keys", req{body: map[string]any{}}, &k2)
	third := b.run(k2.Token)
	for _, r := range []req{
		{token: w.ka, run: w.ra1.ID},
		{token: k2.Token, run: third.ID},
		{token: third.RunToken},
		{token: w.ka},
	} {
		r.body = map[string]any{"body": "spam"}
		e := wantErr(t, b.do("POST", path, r), 429, clasp.CodeRateLimited, "")
		if e.Details["limit"] != "comments per agent per minute" {
			t.Errorf("comment over the cap: details.limit %v, want the per-agent comment limit", e.Details["limit"])
		}
	}
	var list []clasp.Comment
	b.must(http.StatusOK, "GET", path, req{}, &list)
	if len(list) != 3 {
		t.Errorf("%d comments stored, want 3 (the refused ones are not written)", len(list))
	}
	b.must(http.StatusCreated, "POST", path, req{token: w.kb, run: w.rb.ID, body: map[string]any{"body": "another agent"}}, nil)
}

// TestSecurityCreateCapPerAgent: the issues, comments and runs an agent
// creates share one allowance a minute (CreatesPerAgentMinute), whatever
// credential it uses; the next create of any kind is 429 naming the
// limit, and nothing of it is written; another agent is not held back.
func TestSecurityCreateCapPerAgent(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOpts) { o.limits = Limits{CreatesPerAgentMinute: 3} })
	w := b.world("CR") // opened ra1 and ra2 with ka: two creates of agent a
	b.must(http.StatusCreated, "POST", "/api/companies/"+w.c.ID+"/issues", req{token: w.ka, body: map[string]any{"title": "mine"}}, nil)
	issues := func() []clasp.Issue {
		var l []clasp.Issue
		b.must(http.StatusOK, "GET", "/api/companies/"+w.c.ID+"/issues", req{}, &l)
		return l
	}
	before := issues()
	for _, try := range []struct {
		method, path string
		r            req
	}{
		{"POST", "/api/companies/" + w.c.ID + "/issues", req{token: w.ka, run: w.ra1.ID, body: map[string]any{"title": "flood"}}},
		{"POST", "/api/issues/" + before[0].ID + "/comments", req{token: w.ra2.RunToken, body: map[string]any{"body": "flood"}}},
		{"POST", "/api/agents/me/runs", req{token: w.ka, body: map[string]any{}}},
	} {
		e := wantErr(t, b.do(try.method, try.path, try.r), 429, clasp.CodeRateLimited, "")
		if e.Details["limit"] != "creates per agent per minute" {
			t.Errorf("%s %s over the cap: details.limit %v, want the per-agent create limit", try.method, try.path, e.Details["limit"])
		}
	}
	if after := issues(); len(after) != len(before) {
		t.Errorf("%d issues after the refused create, want %d", len(after), len(before))
	}
	b.must(http.StatusCreated, "POST", "/api/companies/"+w.c.ID+"/issues", req{token: w.kb, body: map[string]any{"title": "another agent's"}}, nil)
}

// TestSecurityLiveRunCapPerAgent: an agent may have LiveRunsPerAgent live
// runs, with any of its keys; one more open is 429 naming the limit, with
// Retry-After the details.retryAfterSeconds, and opens nothing; finishing
// one frees its place; another agent is not held back.
func TestSecurityLiveRunCapPerAgent(t *testing.T) {
	eachStore(t, func(t *testing.T, pg bool) {
		b := setup(t, onPG(pg), func(o *setupOpts) { o.limits = Limits{LiveRunsPerAgent: 3} })
		w := b.world("LR") // a has ra1 and ra2 live
		var k2 struct {
			Token string `json:"token"`
		}
		b.must(http.StatusCreated, "POST", "/api/agents/"+w.a.ID+"/keys", req{body: map[string]any{}}, &k2)
		third := b.run(k2.Token)
		for _, k := range []string{w.ka, k2.Token} {
			r := b.do("POST", "/api/agents/me/runs", req{token: k, body: map[string]any{}})
			e := wantErr(t, r, 429, clasp.CodeRateLimited, "")
			if e.Details["limit"] != "live runs per agent" {
				t.Errorf("open over the cap: details.limit %v, want the live-run limit", e.Details["limit"])
			}
			if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 || e.Details["retryAfterSeconds"] != float64(ra) {
				t.Errorf("open over the cap: Retry-After %q, details.retryAfterSeconds %v: want the same whole seconds, at least 1", r.header.Get("Retry-After"), e.Details["retryAfterSeconds"])
			}
		}
		var runs []clasp.Run
		b.must(http.StatusOK, "GET", "/api/companies/"+w.c.ID+"/runs?agentId="+w.a.ID, req{}, &runs)
		if len(runs) != 3 {
			t.Errorf("agent has %d runs after the refused opens, want 3", len(runs))
		}
		b.must(http.StatusOK, "POST", "/api/runs/"+third.ID+"/finish", req{token: k2.Token, run: third.ID, body: map[string]any{"status": "succeeded"}}, nil)
		b.run(w.ka)
		b.run(w.kb)
	})
}

// TestSecurityRefusedCreatesDoNotCount: a create refused for another
// reason (an open over the live-run limit, an issue create the store
// refuses) takes nothing from the agent's allowance of creates: only rows
// created count.
func TestSecurityRefusedCreatesDoNotCount(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOpts) { o.limits = Limits{LiveRunsPerAgent: 2, CreatesPerAgentMinute: 4} })
	w := b.world("RC") // a opened ra1 and ra2: two creates, and its two live runs
	for range 10 {
		wantErr(t, b.do("POST", "/api/agents/me/runs", req{token: w.ka, body: map[string]any{}}), 429, clasp.CodeRateLimited, "")
		if r := b.do("POST", "/api/companies/"+w.c.ID+"/issues", req{token: w.ka, body: map[string]any{"title": "x", "assigneeAgentId": uuid.NewString()}}); r.status < 400 || r.status == 429 {
			t.Fatalf("an issue for an agent that does not exist: %d %s, want the store's refusal", r.status, r.body)
		}
	}
	b.must(http.StatusOK, "POST", "/api/runs/"+w.ra1.ID+"/finish", req{token: w.ka, run: w.ra1.ID, body: map[string]any{"status": "succeeded"}}, nil)
	b.run(w.ka)
	b.must(http.StatusCreated, "POST", "/api/companies/"+w.c.ID+"/issues", req{token: w.ka, body: map[string]any{"title": "the fourth create"}}, nil)
	e := wantErr(t, b.do("POST", "/api/companies/"+w.c.ID+"/issues", req{token: w.ka, body: map[string]any{"title": "the fifth"}}), 429, clasp.CodeRateLimited, "")
	if e.Details["limit"] != "creates per agent per minute" {
		t.Errorf("the fifth create: details.limit %v, want the per-agent create limit", e.Details["limit"])
	}
}

// twoServers starts two servers on one database (a fresh PostgreSQL
// schema, or one SQLite file), each with opts, sharing the first's board
// token: two replicas of one deployment.
func twoServers(t *testing.T, pg bool, opts ...func(*setupOpts)) (a, b *bundle) {
	t.Helper()
	if pg {
		st, replica := openPostgresSchema(t)
		t.Cleanup(func() { _ = st.Close() })
		a = setup(t, append(opts, func(o *setupOpts) { o.store = st })...)
		b = setup(t, append(opts, func(o *setupOpts) { o.store = replica() })...)
	} else {
		a = setup(t, opts...)
		b = setup(t, append(opts, func(o *setupOpts) { o.store = a.st })...)
	}
	b.board = a.board
	return a, b
}

// TestSecurityLiveRunCapConcurrent: 20 opens of one agent's runs sent at
// once, on two servers of one database (PostgreSQL) or one (SQLite),
// leave exactly LiveRunsPerAgent runs open: the limit is decided in the
// store, not by a count read before the insert.
func TestSecurityLiveRunCapConcurrent(t *testing.T) {
	eachStore(t, func(t *testing.T, pg bool) {
		const limit = 4
		b, other := twoServers(t, pg, func(o *setupOpts) { o.limits = Limits{LiveRunsPerAgent: limit} })
		co := b.company("LC")
		ag, key := b.agent(co.ID, "many")
		var wg sync.WaitGroup
		start := make(chan struct{})
		statuses := make([]int, 20)
		for i := range statuses {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				srv := b
				if i%2 == 1 {
					srv = other
				}
				statuses[i] = srv.do("POST", "/api/agents/me/runs", req{token: key, body: map[string]any{}}).status
			}()
		}
		close(start)
		wg.Wait()
		ok := 0
		for _, st := range statuses {
			switch st {
			case http.StatusCreated:
				ok++
			case http.StatusTooManyRequests:
			default:
				t.Errorf("a concurrent open answered %d, want 201 or 429", st)
			}
		}
		var runs []clasp.Run
		b.must(http.StatusOK, "GET", "/api/companies/"+co.ID+"/runs?agentId="+ag.ID, req{}, &runs)
		if ok != limit || len(runs) != limit {
			t.Errorf("%d opens succeeded and the agent has %d runs, want exactly %d", ok, len(runs), limit)
		}
	})
}

// TestSecurityStreamCaps: an agent may hold StreamsPerAgent open event
// streams whatever credentials it opens them with (its key, a run token,
// another key), and the server Streams in all; one more answers 429 with
// Retry-After (and the same seconds in details.retryAfterSeconds), while
// another agent and the board still get theirs; a closed stream gives its
// slot back.
func TestSecurityStreamCaps(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOpts) { o.limits = Limits{StreamsPerAgent: 1, Streams: 3} })
	w := b.world("SC")
	path := "/api/companies/" + w.c.ID + "/events"
	ctx1, cancel1 := context.WithCancel(context.Background())
	defer cancel1()
	if res, _ := b.openStream(ctx1, path, w.ka, nil); res.StatusCode != 200 {
		t.Fatalf("first stream: %d", res.StatusCode)
	}
	for _, tok := range []string{w.ra1.RunToken, w.ra2.RunToken} {
		e := wantErr(t, b.do("GET", path, req{token: tok}), 429, clasp.CodeRateLimited, "")
		if e.Details["limit"] != "event streams per agent" {
			t.Errorf("a run token's stream over its agent's cap: details.limit %v, want event streams per agent", e.Details["limit"])
		}
	}
	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	if res, _ := b.openStream(ctxB, path, w.kb, nil); res.StatusCode != 200 {
		t.Fatalf("another agent's stream: %d", res.StatusCode)
	}
	r := b.do("GET", path, req{token: w.ka})
	e := wantErr(t, r, 429, clasp.CodeRateLimited, "")
	if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("stream over the cap: Retry-After %q, want a positive number of seconds", r.header.Get("Retry-After"))
	} else if got, _ := e.Details["retryAfterSeconds"].(float64); int(got) != ra {
		t.Errorf("stream over the cap: details.retryAfterSeconds %v, want the Retry-After %d", e.Details["retryAfterSeconds"], ra)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	if res, _ := b.openStream(ctx2, path, "", nil); res.StatusCode != 200 {
		t.Fatalf("board stream: %d", res.StatusCode)
	}
	_, kb := b.agent(w.c.ID, "third")
	r = b.do("GET", path, req{token: kb})
	wantErr(t, r, 429, clasp.CodeRateLimited, "")
	if r.header.Get("Retry-After") == "" {
		t.Errorf("stream over the server's cap: 429 without Retry-After")
	}
	// Closing the first stream frees a slot (the handler ends when the
	// client goes away; retry until it has).
	cancel1()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx3, cancel3 := context.WithCancel(context.Background())
		res, _ := b.openStream(ctx3, path, w.ka, nil)
		cancel3()
		if res.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the closed stream's slot never came back")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// streamEnds reports whether the stream ch ends (within 10 s; a stream that
// never ends fails the test) and how long it took after start.
func streamEnds(t *testing.T, ch <-chan sseEvent, start time.Time, what string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				t.Logf("%s: stream closed %v after the change", what, time.Since(start).Round(time.Millisecond))
				return
			}
		case <-timeout:
			t.Fatalf("%s: the event stream is still open 10 s later", what)
		}
	}
}

// TestSecurityRevocationEndsStreams: revoking a key, terminating an agent
// and ending a run close the event streams of that credential, on the
// replica that made the change and (PostgreSQL) on another one; the
// board's and other agents' streams stay open.
func TestSecurityRevocationEndsStreams(t *testing.T) {
	eachStore(t, func(t *testing.T, pg bool) {
		var a, b *bundle
		if pg {
			st, replica := openPostgresSchema(t)
			t.Cleanup(func() { st.Close() })
			a = setup(t, func(o *setupOpts) { o.store = st })
			b = setup(t, func(o *setupOpts) { o.store = replica() })
			b.board = a.board // the database's board token is the first replica's
		} else {
			a = setup(t)
			b = a
		}
		w := a.world("RV")
		path := "/api/companies/" + w.c.ID + "/events"
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()

		// A second key of agent a, revoked: its stream on replica b ends.
		var k clasp.APIKey
		a.must(http.StatusCreated, "POST", "/api/agents/"+w.a.ID+"/keys", req{body: map[string]any{}}, &k)
		_, chKey := b.openStream(ctx, path, k.Token, nil)
		_, chBoard := b.openStream(ctx, path, "", nil)
		_, chOther := b.openStream(ctx, path, w.ka, nil) // the agent's first key stays valid
		start := time.Now()
		a.must(http.StatusOK, "DELETE", "/api/agents/"+w.a.ID+"/keys/"+k.ID, req{}, nil)
		streamEnds(t, chKey, start, "revoked key")
		wantErr(t, b.do("GET", path, req{token: k.Token}), 401, clasp.CodeUnauthenticated, "")

		// A run token's stream ends when its run ends.
		run := a.run(w.ka)
		_, chRun := b.openStream(ctx, path, run.RunToken, nil)
		start = time.Now()
		a.must(http.StatusOK, "POST", "/api/runs/"+run.ID+"/finish", req{token: run.RunToken, body: map[string]any{"status": "succeeded"}}, nil)
		streamEnds(t, chRun, start, "ended run")

		// Terminating the agent ends its key's stream.
		start = time.Now()
		a.must(http.StatusOK, "PATCH", "/api/agents/"+w.a.ID, req{body: map[string]any{"status": "terminated"}}, nil)
		streamEnds(t, chOther, start, "terminated agent")

		// The board's stream saw all of it and is still open.
		nextEvent(t, chBoard, clasp.ActionAgentUpdated)
		b.issue(w.c.ID, nil)
		nextEvent(t, chBoard, clasp.ActionIssueCreated)
	})
}

// TestSecurityDeniedWritesLogged: a refused write is logged at info with
// the actor, the route, the code and the request id.
func TestSecurityDeniedWritesLogged(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	b := setup(t, func(o *setupOpts) { o.logger = log })
	w := b.world("DW")
	r := b.do("POST", "/api/companies", req{token: w.ka, body: map[string]any{"name": "x", "issuePrefix": "XX"}, headers: map[string]string{RequestIDHeader: "denied-1"}})
	wantErr(t, r, 403, clasp.CodeForbidden, "")
	b.do("POST", "/api/companies", req{token: "clasp_ak_nope", body: map[string]any{}, headers: map[string]string{RequestIDHeader: "denied-2"}})
	logs := buf.String()
	for _, want := range []string{
		`msg="write refused" actor=agent:` + w.a.ID + ` method=POST route=/api/companies status=403 code=forbidden request_id=denied-1`,
		`msg="write refused" actor=anonymous method=POST route=/api/companies status=401 code=unauthenticated request_id=denied-2`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q; got:\n%s", want, logs)
		}
	}
}

// TestSecurityNoExistenceOracle: on every API route whose path takes an
// id (read from routes.go, so a new route is covered when it is added),
// an agent naming another company's objects gets exactly the answer it
// gets for ids that exist nowhere: the same status and the same body
// apart from the ids and the request id. A plausible body is sent to the
// writes, so that they reach the lookup rather than stop at validation.
func TestSecurityNoExistenceOracle(t *testing.T) {
	eachStore(t, func(t *testing.T, pg bool) {
		b := setup(t, onPG(pg))
		w := b.world("EO")
		o := b.world("EP") // another company, with its own agents, runs and issue
		theirIssue := b.issue(o.c.ID, nil)
		var cm clasp.Comment
		b.must(http.StatusCreated, "POST", "/api/issues/"+theirIssue.ID+"/comments", req{body: map[string]any{"body": "theirs"}}, &cm)
		var keys []clasp.APIKey
		b.must(http.StatusOK, "GET", "/api/agents/"+o.a.ID+"/keys", req{}, &keys)
		if len(keys) == 0 {
			t.Fatal("the other company's agent has no key")
		}
		theirs := map[string]string{"{companyId}": o.c.ID, "{commentId}": cm.ID, "{keyId}": keys[0].ID}
		idOf := map[string]string{"/api/agents/": o.a.ID, "/api/runs/": o.ra1.ID, "/api/issues/": theirIssue.ID}
		missing := map[string]string{}
		for _, k := range []string{"{id}", "{companyId}", "{commentId}", "{keyId}"} {
			missing[k] = uuid.NewString()
		}
		bodies := map[string]any{
			"POST /api/issues/{id}/checkout":            map[string]any{"agentId": w.a.ID, "expectedStatuses": []string{"todo"}},
			"POST /api/issues/{id}/comments":            map[string]any{"body": "hello"},
			"PATCH /api/issues/{id}":                    map[string]any{"title": "renamed"},
			"POST /api/issues/{id}/admin/force-release": map[string]any{"reason": "probe"},
			"POST /api/runs/{id}/finish":                map[string]any{"status": "succeeded"},
			"PATCH /api/agents/{id}":                    map[string]any{"status": "paused"},
			"POST /api/companies/{companyId}/issues":    map[string]any{"title": "probe"},
			"POST /api/companies/{companyId}/agents":    map[string]any{"name": "probe"},
		}
		checked := 0
		for _, pat := range routePatterns(t) {
			method, path, _ := strings.Cut(pat, " ")
			if !strings.HasPrefix(path, "/api/") || !strings.Contains(path, "{") {
				continue
			}
			fill := func(ids map[string]string, own bool) string {
				p := path
				for k, v := range ids {
					p = strings.ReplaceAll(p, k, v)
				}
				if own {
					for prefix, id := range idOf {
						if strings.HasPrefix(p, prefix+"{id}") {
							p = strings.Replace(p, "{id}", id, 1)
						}
					}
				}
				return p
			}
			var body any
			if method != "GET" && method != "DELETE" {
				body = map[string]any{}
				if bb, ok := bodies[pat]; ok {
					body = bb
				}
			}
			send := func(p string, ids []string) (int, string) {
				r := b.do(method, p, req{token: w.ka, run: w.ra1.ID, body: body})
				if r.status < 400 {
					return r.status, "success"
				}
				e := r.errBody(t)
				msg := e.Error
				for _, id := range ids {
					msg = strings.ReplaceAll(msg, id, "ID")
				}
				det := map[string]any{}
				for k, v := range e.Details {
					if k == "requestId" {
						continue
					}
					if s, ok := v.(string); ok {
						for _, id := range ids {
							s = strings.ReplaceAll(s, id, "ID")
						}
						v = s
					}
					det[k] = v
				}
				return r.status, fmt.Sprintf("%s %s %v", e.Code, msg, det)
			}
			theirIDs := []string{o.c.ID, o.a.ID, o.ra1.ID, theirIssue.ID, cm.ID, keys[0].ID, theirIssue.Identifier}
			missIDs := []string{}
			for _, v := range missing {
				missIDs = append(missIDs, v)
			}
			st1, a := send(fill(theirs, true), theirIDs)
			st2, m := send(fill(missing, false), missIDs)
			checked++
			if st1 < 400 || st1 != st2 || a != m {
				t.Errorf("%s: another company's ids answered %d %q, ids that exist nowhere %d %q; want one refusal", pat, st1, a, st2, m)
			}
		}
		if checked < 15 {
			t.Fatalf("only %d routes with ids checked; routes.go's patterns were not read as expected", checked)
		}
	})
}

// TestSecurityKeyRevocationEndsItsRuns: revoking an API key ends every
// run opened with it, in the same transaction: on another replica its run
// token answers 401 at once (heartbeat, checkout, /agents/me), the run is
// cancelled with errorCode key_revoked and a run.finished row, the issue
// it held is unlocked, and its event stream ends; a run opened with the
// agent's other key is untouched.
func TestSecurityKeyRevocationEndsItsRuns(t *testing.T) {
	eachStore(t, func(t *testing.T, pg bool) {
		a, b := twoServers(t, pg)
		w := a.world("KR")
		var k clasp.APIKey
		a.must(http.StatusCreated, "POST", "/api/agents/"+w.a.ID+"/keys", req{body: map[string]any{}}, &k)
		leaked := a.run(k.Token)
		iss := a.issue(w.c.ID, map[string]any{"status": "todo"})
		a.must(http.StatusOK, "POST", "/api/issues/"+iss.ID+"/checkout", req{token: leaked.RunToken,
			body: map[string]any{"agentId": w.a.ID, "expectedStatuses": []string{"todo"}}}, nil)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		res, events := b.openStream(ctx, "/api/companies/"+w.c.ID+"/events", leaked.RunToken, nil)
		if res.StatusCode != 200 {
			t.Fatalf("run token's event stream: %d", res.StatusCode)
		}

		a.must(http.StatusOK, "DELETE", "/api/agents/"+w.a.ID+"/keys/"+k.ID, req{}, nil)
		start := time.Now()
		for _, probe := range []struct{ method, path string }{
			{"GET", "/api/agents/me"},
			{"POST", "/api/runs/" + leaked.ID + "/heartbeat"},
			{"POST", "/api/issues/" + iss.ID + "/checkout"},
		} {
			var body any
			if probe.method == "POST" {
				body = map[string]any{"agentId": w.a.ID}
			}
			wantErr(t, b.do(probe.method, probe.path, req{token: leaked.RunToken, body: body}), http.StatusUnauthorized, clasp.CodeUnauthenticated, "")
		}
		var run clasp.Run
		b.must(http.StatusOK, "GET", "/api/runs/"+leaked.ID, req{}, &run)
		if run.Status != clasp.RunCancelled || run.ErrorCode == nil || *run.ErrorCode != "key_revoked" {
			t.Errorf("the revoked key's run: status %s, errorCode %v; want cancelled, key_revoked", run.Status, run.ErrorCode)
		}
		var got clasp.Issue
		b.must(http.StatusOK, "GET", "/api/issues/"+iss.ID, req{}, &got)
		if got.CheckoutRunID != nil || got.ExecutionRunID != nil {
			t.Errorf("the revoked key's run still locks %s: checkout %v, execution %v", iss.Identifier, got.CheckoutRunID, got.ExecutionRunID)
		}
		finished := false
		for _, row := range a.companyActivityRows(w.c.ID) {
			if row.Action == clasp.ActionRunFinished && row.EntityID == leaked.ID {
				finished = true
			}
		}
		if !finished {
			t.Errorf("no run.finished row for the revoked key's run")
		}
		streamEnds(t, events, start, "run token's stream after its key's revocation")
		// The agent's other key and its runs go on.
		b.must(http.StatusOK, "POST", "/api/runs/"+w.ra1.ID+"/heartbeat", req{token: w.ka, run: w.ra1.ID, body: map[string]any{}}, nil)
		b.must(http.StatusOK, "GET", "/api/agents/me", req{token: w.ra2.RunToken}, nil)
	})
}

// TestSecurityGateTokenChecksOnly (RULES.md G4): a gate token answers 403
// forbidden on every route of routes.go but the gate's check, whatever
// the method and the ids (its own company's), writes nothing, and judges
// its own company's issues alone (another company's issue is unknown);
// once revoked it answers 401 at once. Both stores.
func TestSecurityGateTokenChecksOnly(t *testing.T) {
	eachStore(t, func(t *testing.T, pg bool) {
		b := setup(t, onPG(pg))
		w := b.world("GT")
		o := b.world("GU")
		mine := b.issue(w.c.ID, map[string]any{"status": "todo"})
		theirs := b.issue(o.c.ID, map[string]any{"status": "todo"})
		var g clasp.GateToken
		b.must(http.StatusCreated, "POST", "/api/companies/"+w.c.ID+"/gate-tokens", req{body: map[string]any{"name": "ci"}}, &g)
		if !strings.HasPrefix(g.Token, "clasp_gt_") || g.Prefix != g.Token[:KeyPrefixLen] {
			t.Fatalf("gate token %q, prefix %q: want clasp_gt_... and its id as prefix", g.Token, g.Prefix)
		}
		before := len(b.activityOf(w.c.ID))
		ids := map[string]string{"{companyId}": w.c.ID, "{id}": mine.ID, "{commentId}": uuid.NewString(), "{keyId}": uuid.NewString()}
		checked := 0
		for _, pat := range routePatterns(t) {
			method, path, _ := strings.Cut(pat, " ")
			if !strings.HasPrefix(path, "/api/") || pat == "GET /api/openapi.json" || pat == "POST /api/gate/check" {
				continue
			}
			for k, v := range ids {
				path = strings.ReplaceAll(path, k, v)
			}
			var body any
			if method != "GET" && method != "DELETE" {
				body = map[string]any{}
			}
			wantErr(t, b.do(method, path, req{token: g.Token, body: body}), http.StatusForbidden, clasp.CodeForbidden, "")
			checked++
		}
		if checked < 40 {
			t.Fatalf("only %d routes checked", checked)
		}
		if n := len(b.activityOf(w.c.ID)); n != before {
			t.Errorf("the gate token's refused calls wrote %d activity rows", n-before)
		}
		var out struct {
			OK      bool                 `json:"ok"`
			Results []*clasp.GateVerdict `json:"results"`
		}
		b.must(http.StatusOK, "POST", "/api/gate/check", req{token: g.Token, body: map[string]any{"stamps": []map[string]any{
			{"issue": mine.Identifier, "epoch": 0}, {"issue": theirs.Identifier, "epoch": 0}}}}, &out)
		if out.OK || len(out.Results) != 2 || out.Results[0].Reason != clasp.GateNotHeld || out.Results[1].Reason != clasp.GateUnknown {
			t.Errorf("check: got %+v; want not_held for its own unheld issue, unknown for another company's", out)
		}
		many := make([]map[string]any, 1001)
		for k := range many {
			many[k] = map[string]any{"issue": mine.Identifier, "epoch": 0}
		}
		wantErr(t, b.do("POST", "/api/gate/check", req{token: g.Token, body: map[string]any{"stamps": many}}), http.StatusBadRequest, clasp.CodeInvalidRequest, "stamps")
		wantErr(t, b.do("POST", "/api/gate/check", req{token: g.Token, body: map[string]any{"stamps": []map[string]any{{"issue": "nope", "epoch": 1}}}}), http.StatusBadRequest, clasp.CodeInvalidRequest, "stamps")
		b.must(http.StatusOK, "DELETE", "/api/companies/"+w.c.ID+"/gate-tokens/"+g.ID, req{}, nil)
		wantErr(t, b.do("POST", "/api/gate/check", req{token: g.Token, body: map[string]any{"stamps": []map[string]any{}}}), http.StatusUnauthorized, clasp.CodeUnauthenticated, "")
	})
}
