package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/clasp-dev/clasp"
)

// Ids in paths and filters: a value that cannot be an id is 400
// invalid_request naming the parameter, a well-formed id of nothing is 404
// not_found (or, for a filter, an empty list), and a good one is served.

// unknownID is a well-formed UUID that names nothing.
const unknownID = "0b0e2b53-6f42-4d6e-8f0c-2b7c1b9d1c3e"

// idRoute is one route with path ids, and how to call it well.
type idRoute struct {
	pattern string // as registered: "DELETE /api/agents/{id}/keys/{keyId}"
	// good gives each wildcard a value that names a real resource.
	good map[string]string
	// token is the caller's credential ("" the board), run its run header.
	token, run string
	body       any
	// status is the answer to the good request; goodMethod, when set, is
	// the method it is sent with (HEAD for the event stream).
	status     int
	goodMethod string
}

// path fills the pattern's wildcards from vals.
func (rt idRoute) path(vals map[string]string) (method, path string) {
	method, path, _ = strings.Cut(rt.pattern, " ")
	for k, v := range vals {
		path = strings.ReplaceAll(path, "{"+k+"}", v)
	}
	return method, path
}

// TestPathIDsTable: on every route with ids in its path, for each id in
// turn, a value that is no id of its kind answers 400 invalid_request with
// details.field the parameter and writes nothing; a well-formed id that
// names nothing answers 404 not_found; the good request is served. Issue
// routes take the identifier (PREFIX-N, any case) as well as the UUID.
// Every registered route with a wildcard must be in the table.
func TestPathIDsTable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world("PI")
	iss := b.issue(w.c.ID, map[string]any{"status": "todo"})
	var cm clasp.Comment
	b.must(http.StatusCreated, "POST", "/api/issues/"+iss.ID+"/comments", req{body: map[string]any{"body": "first"}}, &cm)
	var key clasp.APIKey
	b.must(http.StatusCreated, "POST", "/api/agents/"+w.b.ID+"/keys", req{body: map[string]any{"name": "spare"}}, &key)
	writeRunLog(b, w.ra1.ID, "log line\n")
	opA, opB := b.operatorToken("viewer", ""), b.operatorToken("viewer", "")
	var gt clasp.GateToken
	b.must(http.StatusCreated, "POST", "/api/companies/"+w.c.ID+"/gate-tokens", req{body: map[string]any{"name": "ci"}}, &gt)
	var wh, spareWH clasp.Webhook
	b.must(http.StatusCreated, "POST", "/api/companies/"+w.c.ID+"/webhooks", req{body: map[string]any{"url": "https://example.com/h", "events": []string{"issue.*"}}}, &wh)
	b.must(http.StatusCreated, "POST", "/api/companies/"+w.c.ID+"/webhooks", req{body: map[string]any{"url": "https://example.com/s", "events": []string{"issue.*"}}}, &spareWH)
	b.must(http.StatusCreated, "POST", "/api/issues/"+iss.ID+"/comments", req{body: map[string]any{"body": "for the webhook"}}, nil)
	var dl []clasp.WebhookDelivery
	b.must(http.StatusOK, "GET", "/api/webhooks/"+wh.ID+"/deliveries", req{}, &dl)

	co := map[string]string{"companyId": w.c.ID}
	ag := map[string]string{"id": w.b.ID}
	is := map[string]string{"id": iss.ID}
	open := []clasp.IssueStatus{clasp.IssueBacklog, clasp.IssueTodo, clasp.IssueInProgress, clasp.IssueInReview, clasp.IssueBlocked}
	routes := []idRoute{
		{pattern: "GET /api/companies/{companyId}", good: co, status: 200},
		{pattern: "PATCH /api/companies/{companyId}", good: co, body: map[string]any{"branchTemplate": clasp.DefaultBranchTemplate}, status: 200},
		{pattern: "DELETE /api/operators/tokens/{id}", good: map[string]string{"id": opA.ID}, status: 200},
		{pattern: "POST /api/companies/{companyId}/gate-tokens", good: co, body: map[string]any{"name": "ci2"}, status: 201},
		{pattern: "GET /api/companies/{companyId}/gate-tokens", good: co, status: 200},
		{pattern: "POST /api/companies/{companyId}/archive", good: co, status: 200},
		{pattern: "POST /api/companies/{companyId}/unarchive", good: co, status: 200},
		{pattern: "DELETE /api/companies/{companyId}/gate-tokens/{id}", good: map[string]string{"companyId": w.c.ID, "id": gt.ID}, status: 200},
		{pattern: "POST /api/operators/tokens/{id}/rotate", good: map[string]string{"id": opB.ID}, body: map[string]any{}, status: 201},
		{pattern: "POST /api/companies/{companyId}/agents", good: co, body: map[string]any{"name": "gamma"}, status: 201},
		{pattern: "GET /api/companies/{companyId}/agents", good: co, status: 200},
		{pattern: "GET /api/agents/{id}", good: ag, status: 200},
		{pattern: "PATCH /api/agents/{id}", good: ag, body: map[string]any{"role": "reviewer"}, status: 200},
		{pattern: "POST /api/agents/{id}/keys", good: ag, body: map[string]any{}, status: 201},
		{pattern: "GET /api/agents/{id}/keys", good: ag, status: 200},
		{pattern: "DELETE /api/agents/{id}/keys/{keyId}", good: map[string]string{"id": w.b.ID, "keyId": key.ID}, status: 200},
		{pattern: "POST /api/agents/{id}/wakeup", good: ag, body: map[string]any{}, status: 202},
		{pattern: "POST /api/runs/{id}/heartbeat", good: map[string]string{"id": w.ra1.ID}, token: w.ka, status: 200},
		{pattern: "POST /api/runs/{id}/finish", good: map[string]string{"id": w.ra2.ID}, body: map[string]any{"status": "cancelled"}, status: 200},
		{pattern: "GET /api/runs/{id}", good: map[string]string{"id": w.ra1.ID}, status: 200},
		{pattern: "GET /api/companies/{companyId}/runs", good: co, status: 200},
		{pattern: "GET /api/runs/{id}/log", good: map[string]string{"id": w.ra1.ID}, status: 200},
		{pattern: "POST /api/runs/{id}/cancel", good: map[string]string{"id": w.rb.ID}, body: map[string]any{}, status: 200},
		{pattern: "POST /api/companies/{companyId}/issues", good: co, body: map[string]any{"title": "another"}, status: 201},
		{pattern: "GET /api/companies/{companyId}/issues", good: co, status: 200},
		{pattern: "GET /api/issues/{id}", good: map[string]string{"id": strings.ToLower(iss.Identifier)}, status: 200},
		{pattern: "PATCH /api/issues/{id}", good: is, body: map[string]any{"title": "renamed"}, status: 200},
		{pattern: "POST /api/issues/{id}/checkout", good: map[string]string{"id": iss.Identifier}, token: w.ka, run: w.ra1.ID,
			body: map[string]any{"agentId": w.a.ID, "expectedStatuses": open}, status: 200},
		{pattern: "POST /api/issues/{id}/release", good: is, token: w.ka, run: w.ra1.ID, body: map[string]any{}, status: 200},
		{pattern: "POST /api/issues/{id}/admin/force-release", good: is, body: map[string]any{"reason": "test"}, status: 200},
		{pattern: "GET /api/issues/{id}/comments", good: is, status: 200},
		{pattern: "POST /api/issues/{id}/comments", good: is, body: map[string]any{"body": "second"}, status: 201},
		{pattern: "GET /api/issues/{id}/comments/{commentId}", good: map[string]string{"id": iss.Identifier, "commentId": cm.ID}, status: 200},
		{pattern: "GET /api/issues/{id}/heartbeat-context", good: is, token: w.ka, run: w.ra1.ID, status: 200},
		{pattern: "GET /api/issues/{id}/activity", good: is, status: 200},
		{pattern: "GET /api/companies/{companyId}/activity", good: co, status: 200},
		{pattern: "GET /api/companies/{companyId}/events", good: co, status: 200, goodMethod: "HEAD"},
		{pattern: "GET /api/companies/{companyId}/attention", good: co, status: 200},
		{pattern: "POST /api/companies/{companyId}/webhooks", good: co, body: map[string]any{"url": "https://example.com/n", "events": []string{"*"}}, status: 201},
		{pattern: "GET /api/companies/{companyId}/webhooks", good: co, status: 200},
		{pattern: "GET /api/webhooks/{id}", good: map[string]string{"id": wh.ID}, status: 200},
		{pattern: "PATCH /api/webhooks/{id}", good: map[string]string{"id": wh.ID}, body: map[string]any{"enabled": true}, status: 200},
		{pattern: "DELETE /api/webhooks/{id}", good: map[string]string{"id": spareWH.ID}, status: 204},
		{pattern: "GET /api/webhooks/{id}/deliveries", good: map[string]string{"id": wh.ID}, status: 200},
		{pattern: "POST /api/webhook-deliveries/{id}/redeliver", good: map[string]string{"id": dl[0].ID}, body: map[string]any{}, status: 202},
	}

	covered := map[string]bool{}
	for _, rt := range routes {
		covered[rt.pattern] = true
	}
	for _, p := range b.srv.patterns {
		if strings.Contains(p, "{") && !covered[p] {
			t.Errorf("route %s has path ids but no row in this table", p)
		}
	}

	// Malformed values, for every id of every route: nothing is written.
	before := len(b.activityOf(w.c.ID))
	malformed := []string{"xyz", "not-a-uuid", "0b0e2b53-6f42-4d6e-8f0c-2b7c1b9d1c3", "%00", "%ff%fe"}
	for _, rt := range routes {
		for _, prm := range pathParams(rt.pattern) {
			bad := malformed
			if prm.kind.issueRef {
				bad = append(bad, "ENG", "ENG-", "E-1", "ENGINEERING1-1", "ENG-12a", "ENG-1-2", "12-ENG")
			}
			for _, v := range bad {
				vals := copyVals(rt.good)
				vals[prm.name] = v
				method, path := rt.path(vals)
				res := b.do(method, path, req{token: rt.token, run: rt.run, body: rt.body})
				t.Run(rt.pattern+"/"+prm.name+"="+v, func(t *testing.T) {
					e := wantErr(t, res, http.StatusBadRequest, clasp.CodeInvalidRequest, prm.name)
					if !strings.Contains(e.Error, "Path parameter "+prm.name) || !strings.Contains(e.Error, "UUID") {
						t.Errorf("message %q: want it to name path parameter %s and say a UUID is expected", e.Error, prm.name)
					}
				})
			}
		}
	}
	if after := len(b.activityOf(w.c.ID)); after != before {
		t.Errorf("malformed ids wrote %d activity rows", after-before)
	}

	// Well-formed ids that name nothing.
	for _, rt := range routes {
		for _, prm := range pathParams(rt.pattern) {
			unknown := []string{unknownID, strings.ToUpper(unknownID)}
			if prm.kind.issueRef {
				unknown = append(unknown, "PI-999", "zz-1")
			}
			for _, v := range unknown {
				vals := copyVals(rt.good)
				vals[prm.name] = v
				method, path := rt.path(vals)
				tok := rt.token
				if prm.name == "companyId" {
					tok = "" // an agent gets 403 for any company not its own
				}
				res := b.do(method, path, req{token: tok, run: rt.run, body: rt.body})
				t.Run(rt.pattern+"/"+prm.name+"="+v, func(t *testing.T) {
					wantErr(t, res, http.StatusNotFound, clasp.CodeNotFound, "")
				})
			}
		}
	}

	// The good requests, in the table's order.
	for _, rt := range routes {
		method, path := rt.path(rt.good)
		if rt.goodMethod != "" {
			method = rt.goodMethod
		}
		res := b.do(method, path, req{token: rt.token, run: rt.run, body: rt.body})
		if res.status != rt.status {
			t.Errorf("%s %s: %d, want %d: %s", method, path, res.status, rt.status, res.body)
		}
	}

	// An agent naming a company by a malformed id is told so (400), not
	// refused as for another company (403).
	wantErr(t, b.do("GET", "/api/companies/xyz/issues", req{token: w.ka}), http.StatusBadRequest, clasp.CodeInvalidRequest, "companyId")
	wantErr(t, b.do("GET", "/api/companies/"+unknownID+"/issues", req{token: w.ka}), http.StatusForbidden, clasp.CodeForbidden, "")
	// Credentials are checked before the path.
	wantErr(t, b.do("GET", "/api/runs/xyz", req{noAuth: true}), http.StatusUnauthorized, clasp.CodeUnauthenticated, "")
	wantErr(t, b.do("GET", "/api/agents/xyz/keys", req{token: w.ka}), http.StatusForbidden, clasp.CodeForbidden, "")
	// An identifier with spaces around it names the issue, as the stores read it.
	b.must(http.StatusOK, "GET", "/api/issues/%20"+iss.Identifier+"%20", req{}, nil)
}

// activityOf returns the company's activity rows (the newest 1000).
func (b *bundle) activityOf(companyID string) []*clasp.Activity {
	b.t.Helper()
	var rows []*clasp.Activity
	b.must(http.StatusOK, "GET", "/api/companies/"+companyID+"/activity?limit=1000", req{}, &rows)
	return rows
}

func copyVals(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestIDFiltersTable: every query filter that names an id (runs' agentId,
// issues' assigneeAgentId, activity's entityId, comments' after and
// cursor, heartbeat-context's wakeCommentId) and the issueId of run and
// wake bodies: a value that is not an id, or a filter given twice, is 400
// invalid_request naming it; a well-formed id of nothing filters to
// nothing (an empty list, a null wakeComment; after and cursor, which
// continue from a comment of the list, 400) or, in a body, 404; a good
// one filters, in any case.
func TestIDFiltersTable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world("IF")
	iss := b.issue(w.c.ID, map[string]any{"status": "todo", "assigneeAgentId": w.a.ID})
	var cm clasp.Comment
	b.must(http.StatusCreated, "POST", "/api/issues/"+iss.ID+"/comments", req{body: map[string]any{"body": "first"}}, &cm)
	b.must(http.StatusCreated, "POST", "/api/issues/"+iss.ID+"/comments", req{body: map[string]any{"body": "second"}}, nil)
	cp := "/api/companies/" + w.c.ID
	ip := "/api/issues/" + iss.ID

	for _, tc := range []struct {
		path, param string
		good        string // a value that matches rows
		wantRows    int    // rows the good value gives (-1: not a list)
	}{
		{cp + "/runs", "agentId", w.a.ID, 2},
		{cp + "/issues", "assigneeAgentId", w.a.ID, 1},
		{cp + "/activity", "entityId", iss.ID, -1},
		{ip + "/activity", "entityId", iss.ID, -1},
		{ip + "/comments", "after", cm.ID, 1},
		{ip + "/comments", "cursor", cm.ID, 0},
		{ip + "/heartbeat-context", "wakeCommentId", cm.ID, -1},
	} {
		t.Run(tc.path+"?"+tc.param, func(t *testing.T) {
			for _, bad := range []string{"zzz", "xyz-1", "%00", tc.good[:35], tc.good + "0"} {
				e := wantErr(t, b.do("GET", tc.path+"?"+tc.param+"="+bad, req{}), http.StatusBadRequest, clasp.CodeInvalidRequest, tc.param)
				want := "UUID"
				if bad == "%00" {
					want = "NUL" // refused as text before its shape is looked at
				}
				if !strings.Contains(e.Error, "Query parameter "+tc.param) || !strings.Contains(e.Error, want) {
					t.Errorf("%s=%s: message %q, want it to name the parameter and say %s", tc.param, bad, e.Error, want)
				}
			}
			wantErr(t, b.do("GET", tc.path+"?"+tc.param+"="+tc.good+"&"+tc.param+"="+tc.good, req{}), http.StatusBadRequest, clasp.CodeInvalidRequest, tc.param)
			for _, v := range []string{tc.good, strings.ToUpper(tc.good)} {
				res := b.must(http.StatusOK, "GET", tc.path+"?"+tc.param+"="+v, req{}, nil)
				switch {
				case tc.wantRows >= 0:
					if n := len(*decode[[]map[string]any](t, res)); n != tc.wantRows {
						t.Errorf("%s=%s: %d rows, want %d", tc.param, v, n, tc.wantRows)
					}
				case tc.param == "wakeCommentId":
					if out := decode[heartbeatContextOut](t, res); out.WakeComment == nil || out.WakeComment.ID != cm.ID {
						t.Errorf("%s=%s: wakeComment %+v, want comment %s", tc.param, v, out.WakeComment, cm.ID)
					}
				case strings.HasPrefix(tc.path, cp):
					if n := len(*decode[[]map[string]any](t, res)); n == 0 {
						t.Errorf("%s=%s: no rows, want the issue's", tc.param, v)
					}
				}
			}
			if tc.param == "after" || tc.param == "cursor" {
				// They continue from a comment of the list: one that is not
				// of this issue is refused (commentList).
				wantErr(t, b.do("GET", tc.path+"?"+tc.param+"="+unknownID, req{}), http.StatusBadRequest, clasp.CodeInvalidRequest, tc.param)
				return
			}
			res := b.must(http.StatusOK, "GET", tc.path+"?"+tc.param+"="+unknownID, req{}, nil)
			if tc.param == "wakeCommentId" {
				if out := decode[heartbeatContextOut](t, res); out.WakeComment != nil {
					t.Errorf("wakeCommentId of no comment: %+v, want null", out.WakeComment)
				}
			} else if tc.path == cp+"/activity" || tc.wantRows >= 0 {
				if n := len(*decode[[]map[string]any](t, res)); n != 0 {
					t.Errorf("%s of nothing: %d rows, want none", tc.param, n)
				}
			}
		})
	}

	// Issue references in bodies: the shape is checked, the issue looked up.
	for _, tc := range []struct {
		method, path, token string
	}{
		{"POST", "/api/agents/me/runs", w.ka},
		{"POST", "/api/agents/" + w.a.ID + "/wakeup", ""},
	} {
		for _, bad := range []string{"zzz", "IF-", "%00", "I-1"} {
			wantErr(t, b.do(tc.method, tc.path, req{token: tc.token, body: map[string]any{"issueId": bad}}), http.StatusBadRequest, clasp.CodeInvalidRequest, "issueId")
		}
		for _, unknown := range []string{"IF-999", unknownID} {
			wantErr(t, b.do(tc.method, tc.path, req{token: tc.token, body: map[string]any{"issueId": unknown}}), http.StatusNotFound, clasp.CodeNotFound, "")
		}
	}
}

// TestValidIssueRef: the shapes of an issue reference.
func TestValidIssueRef(t *testing.T) {
	t.Parallel()
	for ref, want := range map[string]bool{
		"ENG-12": true, "eng-12": true, "Ab-1": true, "ABCDEFGHIJ-999999": true, " ENG-1 ": true,
		"0b0e2b53-6f42-4d6e-8f0c-2b7c1b9d1c3e": true, "0B0E2B53-6F42-4D6E-8F0C-2B7C1B9D1C3E": true,
		"": false, "ENG": false, "ENG-": false, "-12": false, "E-12": false, "ABCDEFGHIJK-1": false,
		"EN1-2": false, "ENG-1a": false, "ENG-1-2": false, "ENG_12": false, "ÉNG-1": false, "ENG-\x00": false,
		"ENG-" + strings.Repeat("1", maxRefLen): false, "0b0e2b53-6f42-4d6e-8f0c-2b7c1b9d1c3g": false,
	} {
		if got := validIssueRef(ref); got != want {
			t.Errorf("validIssueRef(%q) = %v, want %v", ref, got, want)
		}
	}
}

// TestPathParamsRefusesUnknownCollection: a route whose wildcard follows
// no known collection is refused at registration, so that no path id goes
// unchecked.
func TestPathParamsRefusesUnknownCollection(t *testing.T) {
	t.Parallel()
	if got := pathParams("DELETE /api/agents/{id}/keys/{keyId}"); len(got) != 2 || got[0].name != "id" || got[1].name != "keyId" || got[1].kind.what != "an API key id" {
		t.Errorf("pathParams: %+v", got)
	}
	defer func() {
		if recover() == nil {
			t.Errorf("pathParams of /api/widgets/{id} did not panic")
		}
	}()
	pathParams("GET /api/widgets/{id}")
}

// TestQueryTextRefused: a query name or value that is not UTF-8 text, or
// holds a NUL, answers 400 invalid_request naming it on every store
// (PostgreSQL refuses such text as a parameter; it must never reach it),
// and escaped UTF-8 text is still accepted.
func TestQueryTextRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world("QT")
	b.issue(w.c.ID, map[string]any{"title": "café", "status": "todo"})
	cp := "/api/companies/" + w.c.ID
	for _, tc := range []struct{ path, field string }{
		{cp + "/issues?q=%ff", "q"},
		{cp + "/issues?q=caf%c3", "q"},
		{cp + "/issues?q=a%00b", "q"},
		{cp + "/activity?action=%ff", "action"},
		{cp + "/issues?status=todo&%ff=1", "query"},
	} {
		e := wantErr(t, b.do("GET", tc.path, req{}), http.StatusBadRequest, clasp.CodeInvalidRequest, tc.field)
		if !strings.Contains(e.Error, "UTF-8") {
			t.Errorf("%s: message %q, want it to say UTF-8 text is expected", tc.path, e.Error)
		}
	}
	res := b.must(http.StatusOK, "GET", cp+"/issues?q=caf%C3%A9", req{}, nil)
	if n := len(*decode[[]map[string]any](t, res)); n != 1 {
		t.Errorf("q=café: %d issues, want 1", n)
	}
}
