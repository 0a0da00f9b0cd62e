package httpapi

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	_ "modernc.org/sqlite"
)

// fuzzRoutes are the request patterns FuzzHandler picks from: every route
// of routes.go (TestPermissionMatrix keeps that list complete) plus a few
// paths no route serves.
var fuzzRoutes = []string{
	"GET /healthz", "GET /readyz", "GET /metrics",
	"POST /api/companies", "GET /api/companies", "GET /api/companies/{companyId}",
	"POST /api/companies/{companyId}/agents", "GET /api/companies/{companyId}/agents",
	"GET /api/agents/{id}", "PATCH /api/agents/{id}", "POST /api/agents/{id}/keys",
	"GET /api/agents/{id}/keys", "DELETE /api/agents/{id}/keys/{keyId}",
	"GET /api/agents/me", "GET /api/agents/me/inbox-lite", "POST /api/agents/me/runs",
	"POST /api/runs/{id}/heartbeat", "POST /api/runs/{id}/finish", "GET /api/runs/{id}",
	"GET /api/companies/{companyId}/runs",
	"POST /api/companies/{companyId}/issues", "GET /api/companies/{companyId}/issues",
	"GET /api/issues/{id}", "PATCH /api/issues/{id}", "POST /api/issues/{id}/checkout",
	"POST /api/issues/{id}/release", "POST /api/issues/{id}/admin/force-release",
	"GET /api/issues/{id}/comments", "POST /api/issues/{id}/comments",
	"GET /api/issues/{id}/activity", "GET /api/companies/{companyId}/activity",
	"GET /api/companies/{companyId}/events",
	"GET /api", "GET /api/nothing/{id}", "PUT /api/issues/{id}",
	"POST /api/agents/me/claim",
}

var fuzzMethods = []string{"GET", "POST", "PATCH", "PUT", "DELETE", "HEAD", "OPTIONS", "get", "TRACE"}

// fuzzWorld is FuzzHandler's fixed cast, built once per fuzzing process.
// Its names ($A, $RA, ...) are substituted into paths, bodies and headers.
type fuzzWorld struct {
	ids    map[string]string // placeholder -> value
	names  []string          // placeholders in a stable order, for selectors
	tokens []string          // bearer tokens to pick from
	keyA   string
	keyB   string
	keyX   string
}

func newFuzzWorld(b *bundle) *fuzzWorld {
	c, d := b.company("FZC"), b.company("FZD")
	a, ka := b.agent(c.ID, "alpha")
	bb, kb := b.agent(c.ID, "beta")
	t, kt := b.agent(c.ID, "gone")
	x, kx := b.agent(d.ID, "xeno")
	var k clasp.APIKey
	b.must(http.StatusCreated, "POST", "/api/agents/"+a.ID+"/keys", req{body: map[string]any{}}, &k)
	b.must(http.StatusOK, "DELETE", "/api/agents/"+a.ID+"/keys/"+k.ID, req{}, nil)
	ra, rb, rx, rt := b.run(ka), b.run(kb), b.run(kx), b.run(ka)
	b.must(http.StatusOK, "POST", "/api/runs/"+rt.ID+"/finish", req{token: ka, body: map[string]any{"status": "failed"}}, nil)
	b.must(http.StatusOK, "PATCH", "/api/agents/"+t.ID, req{body: map[string]any{"status": "terminated"}}, nil)
	i1 := b.issue(c.ID, map[string]any{"status": "todo"})
	i2 := b.issue(c.ID, map[string]any{"status": "todo", "assigneeAgentId": a.ID})
	i3 := b.issue(d.ID, map[string]any{"status": "todo"})
	if r := b.checkout(i2.ID, ka, ra.ID, a.ID); r.status != http.StatusOK {
		b.t.Fatalf("checkout: %d %s", r.status, r.body)
	}
	w := &fuzzWorld{keyA: ka, keyB: kb, keyX: kx, ids: map[string]string{
		"$C": c.ID, "$D": d.ID, "$A": a.ID, "$B": bb.ID, "$T": t.ID, "$X": x.ID, "$K": k.ID,
		"$RA": ra.ID, "$RB": rb.ID, "$RX": rx.ID, "$RT": rt.ID,
		"$I1": i1.ID, "$I2": i2.ID, "$I3": i3.ID, "$N1": i1.Identifier, "$N2": strings.ToLower(i2.Identifier),
		"$U": "00000000-0000-0000-0000-000000000000", "$BAD": "not-a-uuid", "$ME": "me",
	}}
	w.names = append(w.names, "$C", "$D", "$A", "$B", "$T", "$X", "$K", "$RA", "$RB", "$RX", "$RT", "$I1", "$I2", "$I3", "$N1", "$N2", "$U", "$BAD", "$ME")
	w.tokens = []string{b.board, ka, kb, kx, kt, k.Token, ra.RunToken, rb.RunToken, rx.RunToken, rt.RunToken,
		"clasp_ak_nope", "clasp_rt_nope", "clasp_bt_nope", "nope", ""}
	return w
}

// subst replaces the placeholders in s by the world's values (longest
// names first, so $RA is not read as $R).
func (w *fuzzWorld) subst(s string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	pairs := make([]string, 0, 2*len(w.ids))
	for _, n := range []string{"$BAD", "$RA", "$RB", "$RX", "$RT", "$I1", "$I2", "$I3", "$N1", "$N2", "$ME"} {
		pairs = append(pairs, n, w.ids[n])
	}
	for _, n := range []string{"$C", "$D", "$A", "$B", "$T", "$X", "$K", "$U"} {
		pairs = append(pairs, n, w.ids[n])
	}
	return strings.NewReplacer(pairs...).Replace(s)
}

// pick returns the i-th placeholder's value, or free (substituted) when i
// points past them.
func (w *fuzzWorld) pick(i uint8, free string) string {
	if int(i) < len(w.names) {
		return w.ids[w.names[i]]
	}
	return w.subst(free)
}

// fuzzL7 checks invariant L7 on every issue of the database (checkoutRunId
// set => status in_progress and executionRunId = checkoutRunId) and that no
// checkoutEpoch went down since the last call (epochs is updated).
func fuzzL7(t *testing.T, db *sql.DB, epochs map[string]int64, what string) {
	rows, err := db.Query(`SELECT id, status, checkout_run_id, execution_run_id, checkout_epoch FROM issues`)
	if err != nil {
		t.Fatalf("read issues: %v", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, status string
		var co, ex sql.NullString
		var epoch int64
		if err := rows.Scan(&id, &status, &co, &ex, &epoch); err != nil {
			t.Fatalf("scan issue: %v", err)
		}
		if co.Valid && (status != string(clasp.IssueInProgress) || !ex.Valid || ex.String != co.String) {
			t.Fatalf("after %s: L7 broken on issue %s: status %s checkoutRunId %v executionRunId %v", what, id, status, co, ex)
		}
		if prev, ok := epochs[id]; ok && epoch < prev {
			t.Fatalf("after %s: checkoutEpoch of issue %s went down from %d to %d", what, id, prev, epoch)
		}
		epochs[id] = epoch
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read issues: %v", err)
	}
}

// FuzzHandler sends random requests to the whole HTTP handler over a real
// SQLite store: a route pattern of routes.go (or none)
// with real or random ids, a random method some of the time, random
// credentials, run headers, Idempotency-Key and body (placeholders such as
// $A, $RA, $I1 in path parts, headers and body become real ids). The
// invariants: no 500 and no panic, every non-2xx answer is a JSON error
// {error, code, details} with details an object, and L7 holds on every
// issue after each request.
func FuzzHandler(f *testing.F) {
	seeds := []struct {
		route, method, id1, id2, auth, run uint8
		free, body                         string
	}{
		{route: 24, id1: 11, auth: 1, run: 7, body: `{"agentId":"$A","expectedStatuses":["todo"]}`},
		{route: 24, id1: 12, auth: 2, run: 8, body: `{"agentId":"$B","expectedStatuses":["todo","in_progress"]}`},
		{route: 25, id1: 12, auth: 1, run: 7, body: `{"unassign":true}`},
		{route: 25, id1: 12, auth: 0, body: `{}`},
		{route: 23, id1: 12, auth: 1, run: 7, body: `{"status":"done","comment":"finished"}`},
		{route: 23, id1: 11, auth: 0, body: `{"status":"in_progress","assigneeAgentId":"$B"}`},
		{route: 23, id1: 12, auth: 0, body: `{"assigneeAgentId":"$B"}`},
		{route: 17, id1: 7, auth: 1, body: `{"status":"succeeded"}`},
		{route: 16, id1: 7, auth: 6, body: `{}`},
		{route: 15, auth: 1, body: `{"issueId":"$N1"}`},
		{route: 20, id1: 0, auth: 1, run: 7, body: `{"title":"t","status":"todo","assigneeAgentId":"$A"}`},
		{route: 26, id1: 12, auth: 0, body: `{"reason":"stuck","clearAssignee":true}`},
		{route: 28, id1: 11, auth: 2, run: 8, body: `{"body":"hello"}`},
		{route: 9, id1: 4, auth: 0, body: `{"status":"terminated"}`},
		{route: 12, id1: 2, id2: 6, auth: 0},
		{route: 31, id1: 0, auth: 1},
		{route: 22, id1: 13, auth: 3, run: 9},
		{route: 21, id1: 0, auth: 0, free: "?status=todo,in_progress&assigneeAgentId=none&limit=2&cursor=x"},
		{route: 24, id1: 200, auth: 6, free: "$N2", body: `{"agentId":"$A","expectedStatuses":["done"]}`},
		{route: 3, auth: 0, body: `{"name":"Z","issuePrefix":"ZZ","name":"Y"}`},
		{route: 33, method: 3, id1: 200, auth: 14, free: "%zz/../x", body: "\xff\x00"},
		{route: 35, auth: 1, run: 7, body: `{"scope":"any","expectedStatuses":["todo","backlog"]}`},
		{route: 35, auth: 6, body: `{"scope":"mine"}`},
	}
	for _, s := range seeds {
		f.Add(s.route, s.method, s.id1, s.id2, s.auth, s.run, s.free, []byte(s.body))
	}
	b := setup(f)
	w := newFuzzWorld(b)
	db, err := sql.Open("sqlite", b.db+"?_pragma=busy_timeout(10000)&_pragma=query_only(1)")
	if err != nil {
		f.Fatalf("open sqlite reader: %v", err)
	}
	f.Cleanup(func() { db.Close() })
	h := b.srv.Handler()
	epochs := map[string]int64{}

	f.Fuzz(func(t *testing.T, route, method, id1, id2, auth, run uint8, free string, body []byte) {
		pat := fuzzRoutes[int(route)%len(fuzzRoutes)]
		m, path, _ := strings.Cut(pat, " ")
		if method >= 64 { // sometimes a method the route does not take
			m = fuzzMethods[int(method)%len(fuzzMethods)]
		}
		q := ""
		if i := strings.IndexByte(free, '?'); i >= 0 {
			free, q = free[:i], free[i:]
		}
		first := true
		for _, ph := range []string{"{companyId}", "{id}", "{keyId}"} {
			if !strings.Contains(path, ph) {
				continue
			}
			sel := id1
			if !first {
				sel = id2
			}
			first = false
			path = strings.Replace(path, ph, escapePathPart(w.pick(sel, free)), 1)
		}
		target := path + w.subst(q)
		if strings.ContainsAny(target, " \t\r\n") || !strings.HasPrefix(target, "/") {
			return // not a request line a client can send
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if strings.HasSuffix(path, "/events") && m == "GET" {
			// The event stream runs until the client leaves.
			ctx, cancel = context.WithTimeout(ctx, 20*time.Millisecond)
			defer cancel()
		}
		r, err := http.NewRequestWithContext(ctx, m, "http://api.test"+target, bytes.NewReader([]byte(w.subst(string(body)))))
		if err != nil {
			return // not a request a client can send
		}
		if len(body) == 0 && auth&0x40 != 0 {
			r.Body = http.NoBody
		}
		switch tok := w.tokens[int(auth&0x0f)%len(w.tokens)]; {
		case auth&0x0f == 14:
			// no Authorization at all
		case auth&0x80 != 0:
			r.Header.Set("Authorization", "Basic "+tok)
		case auth&0x20 != 0:
			r.Header.Set("Authorization", "bearer   "+tok+" ")
		default:
			r.Header.Set("Authorization", "Bearer "+tok)
		}
		if run != 0 {
			v := w.pick(run&0x1f, free)
			switch {
			case run&0x60 == 0x20:
				r.Header.Set(PaperclipRunIDHdr, v)
			case run&0x60 == 0x40:
				r.Header.Set(RunIDHeader, v)
				r.Header.Set(PaperclipRunIDHdr, w.ids["$RB"])
			default:
				r.Header.Set(RunIDHeader, v)
			}
			if run&0x80 != 0 {
				r.Header.Set("Idempotency-Key", w.subst(free))
			}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		res := rec.Result()
		what := m + " " + target
		if res.StatusCode >= 500 {
			t.Fatalf("%s: status %d: %s", what, res.StatusCode, rec.Body.Bytes())
		}
		// A redirect is not an error: the mux sends one (empty body,
		// Location set) for paths with "..", "//" and the like.
		redirect := res.StatusCode >= 300 && res.StatusCode < 400 && res.Header.Get("Location") != ""
		if res.StatusCode >= 300 && m != "HEAD" && !redirect {
			var e struct {
				Error   *string         `json:"error"`
				Code    *string         `json:"code"`
				Details *map[string]any `json:"details"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == nil || *e.Error == "" || e.Code == nil || *e.Code == "" || e.Details == nil || *e.Details == nil {
				t.Fatalf("%s: status %d with a body that is not {error, code, details}: %q (%v)", what, res.StatusCode, rec.Body.Bytes(), err)
			}
		}
		fuzzL7(t, db, epochs, what)
	})
}

// escapePathPart escapes what would end a path segment or the path.
func escapePathPart(s string) string {
	return strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23").Replace(s)
}
