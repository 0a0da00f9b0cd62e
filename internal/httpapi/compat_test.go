package httpapi

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/clasp-dev/clasp"
)

// The Paperclip compatibility rule of request bodies, field by field, for
// every body that has Paperclip fields clasp does not model: null and
// Paperclip's default are accepted (the request succeeds), any other value
// is 400 invalid_request naming the field and saying which concept clasp
// lacks; a field neither clasp's nor Paperclip's stays "Unknown field".
func TestPaperclipCompatFields(t *testing.T) {
	b := setup(t)
	co := b.company("CF")
	agent, key := b.agent(co.ID, "alpha")
	n := 0
	unique := func(s string) string {
		n++
		return s + strings.Repeat("x", n%7) + string(rune('a'+n%26)) + string(rune('a'+n/26%26))
	}
	type target struct {
		name   string
		fields map[string]compatField
		method string
		path   func() string
		base   func() map[string]any // a valid body without Paperclip fields
		ok     int
	}
	issue := func() *clasp.Issue { return b.issue(co.ID, map[string]any{"status": "todo"}) }
	var cur *clasp.Issue
	targets := []target{
		{"issue create", issueCompat, "POST", func() string { return "/api/companies/" + co.ID + "/issues" },
			func() map[string]any { return map[string]any{"title": "t"} }, http.StatusCreated},
		{"issue update", issueUpdateCompat, "PATCH", func() string { cur = issue(); return "/api/issues/" + cur.ID },
			func() map[string]any { return map[string]any{"priority": "high"} }, http.StatusOK},
		{"comment create", commentCompat, "POST", func() string { cur = issue(); return "/api/issues/" + cur.ID + "/comments" },
			func() map[string]any { return map[string]any{"body": "c"} }, http.StatusCreated},
		{"release", releaseCompat, "POST", func() string { cur = issue(); return "/api/issues/" + cur.ID + "/release" },
			func() map[string]any { return map[string]any{} }, http.StatusOK},
		{"company create", companyCompat, "POST", func() string { return "/api/companies" },
			func() map[string]any { return map[string]any{"name": unique("Co")} }, http.StatusCreated},
		{"agent create", agentCompat, "POST", func() string { return "/api/companies/" + co.ID + "/agents" },
			func() map[string]any { return map[string]any{"name": unique("ag")} }, http.StatusCreated},
		{"key create", keyCompat, "POST", func() string { return "/api/agents/" + agent.ID + "/keys" },
			func() map[string]any { return map[string]any{"name": "k"} }, http.StatusCreated},
	}
	for _, tg := range targets {
		names := make([]string, 0, len(tg.fields))
		for k := range tg.fields {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, f := range names {
			cf := tg.fields[f]
			accepted := []string{"null"}
			if cf.def != "" {
				accepted = append(accepted, cf.def)
			}
			for _, v := range accepted {
				body := tg.base()
				body[f] = json.RawMessage(v)
				res := b.do(tg.method, tg.path(), req{body: body})
				if res.status != tg.ok {
					t.Errorf("%s with %s=%s: status %d, want %d; body %s", tg.name, f, v, res.status, tg.ok, res.body)
				}
			}
			body := tg.base()
			body[f] = "not-paperclips-default"
			res := b.do(tg.method, tg.path(), req{body: body})
			e := wantErr(t, res, http.StatusBadRequest, clasp.CodeInvalidRequest, f)
			if !strings.Contains(e.Error, cf.concept) {
				t.Errorf("%s with %s set: error %q does not say %q", tg.name, f, e.Error, cf.concept)
			}
		}
		body := tg.base()
		body["frobnicate"] = nil
		e := wantErr(t, b.do(tg.method, tg.path(), req{body: body}), http.StatusBadRequest, clasp.CodeInvalidRequest, "frobnicate")
		if !strings.Contains(e.Error, "Unknown field") {
			t.Errorf("%s with an unknown field: error %q, want Unknown field", tg.name, e.Error)
		}
	}
	// allowDuplicate: both booleans are accepted (clasp never deduplicates).
	b.must(http.StatusCreated, "POST", "/api/companies/"+co.ID+"/issues", req{body: map[string]any{"title": "t", "allowDuplicate": true}}, nil)
	// Agents send the same fields with their run.
	r := b.run(key)
	iss := issue()
	b.must(http.StatusCreated, "POST", "/api/issues/"+iss.ID+"/comments", req{token: key, run: r.ID, body: map[string]any{
		"body": "b", "reopen": false, "interrupt": false, "authorType": "agent", "presentation": nil, "metadata": map[string]any{}}}, nil)
	wantErr(t, b.do("POST", "/api/issues/"+iss.ID+"/comments", req{token: key, run: r.ID, body: map[string]any{"body": "b", "authorType": "user"}}),
		http.StatusBadRequest, clasp.CodeInvalidRequest, "authorType")
}

// PATCH null clears a nullable field; a PATCH of only accepted Paperclip
// fields writes nothing and answers the issue; an empty PATCH still
// changes nothing (400).
func TestPatchNullAndPaperclipOnly(t *testing.T) {
	b := setup(t)
	co := b.company("PN")
	a, _ := b.agent(co.ID, "alpha")
	iss := b.issue(co.ID, map[string]any{"description": "keep me", "assigneeAgentId": a.ID, "status": "todo"})
	var got clasp.Issue
	b.must(http.StatusOK, "PATCH", "/api/issues/"+iss.ID, req{body: map[string]any{"projectId": nil, "hiddenAt": nil}}, &got)
	if got.Description != "keep me" || !got.UpdatedAt.Equal(iss.UpdatedAt) {
		t.Errorf("PATCH of Paperclip defaults only: %+v, want the issue unchanged", got)
	}
	b.must(http.StatusOK, "PATCH", "/api/issues/"+iss.ID, req{body: map[string]any{"description": nil, "assigneeAgentId": nil}}, &got)
	if got.Description != "" || got.AssigneeAgentID != nil {
		t.Errorf("PATCH description and assignee null: %+v, want both cleared", got)
	}
	wantErr(t, b.do("PATCH", "/api/issues/"+iss.ID, req{body: map[string]any{}}), http.StatusBadRequest, clasp.CodeInvalidRequest, "")
	wantErr(t, b.do("PATCH", "/api/issues/"+iss.ID, req{body: map[string]any{"description": 5}}), http.StatusBadRequest, clasp.CodeInvalidRequest, "description")
}

// Issue prefixes derived from company names: valid, distinct, Paperclip's
// style (the first letters of the name); a name without letters still
// gets one; the board can still choose its own.
func TestCompanyPrefixDerived(t *testing.T) {
	b := setup(t)
	for _, tc := range []struct{ name, want string }{
		{"Peerless Engine", "PEE"}, {"Peerless Engine", "PEER"}, {"peerless", "PEERL"}, {"P", "PX"}, {"42 ünits", "NIT"}, {"123", "XX"},
	} {
		var c clasp.Company
		b.must(http.StatusCreated, "POST", "/api/companies", req{body: map[string]any{"name": tc.name}}, &c)
		if c.IssuePrefix != tc.want {
			t.Errorf("company %q: issuePrefix %q, want %q", tc.name, c.IssuePrefix, tc.want)
		}
	}
	wantErr(t, b.do("POST", "/api/companies", req{body: map[string]any{"name": "x", "issuePrefix": "PEE"}}), http.StatusConflict, clasp.CodeAlreadyExists, "issuePrefix")
}

// IssuePrefixCandidates are valid, distinct and bounded for any name.
func TestIssuePrefixCandidates(t *testing.T) {
	for _, name := range []string{"", "a", "Peerless Engine", "ZZZZZZZZZZZZZZZZ", "日本", "AB"} {
		cs := clasp.IssuePrefixCandidates(name)
		if len(cs) == 0 || len(cs) > 100 {
			t.Errorf("%q: %d candidates, want 1-100", name, len(cs))
		}
		seen := map[string]bool{}
		for _, c := range cs {
			if !clasp.ValidIssuePrefix(c) || seen[c] {
				t.Errorf("%q: candidate %q invalid or repeated", name, c)
			}
			seen[c] = true
		}
	}
}

// Run-header messages name the header the request used, or both when it
// sent none.
func TestRunHeaderNamedInMessages(t *testing.T) {
	b := setup(t)
	co := b.company("RH")
	a, key := b.agent(co.ID, "alpha")
	iss := b.issue(co.ID, map[string]any{"status": "todo"})
	body := map[string]any{"agentId": a.ID, "expectedStatuses": []string{"todo"}}
	e := wantErr(t, b.do("POST", "/api/issues/"+iss.ID+"/checkout", req{token: key, body: body}), http.StatusUnauthorized, clasp.CodeRunIDRequired, "")
	if !strings.Contains(e.Error, "X-Clasp-Run-Id") || !strings.Contains(e.Error, "X-Paperclip-Run-Id") {
		t.Errorf("no run header: %q, want both header names", e.Error)
	}
	missing := "11111111-1111-4111-8111-111111111111"
	for _, h := range []string{"X-Paperclip-Run-Id", "X-Clasp-Run-Id"} {
		other := map[string]string{"X-Paperclip-Run-Id": "X-Clasp-Run-Id", "X-Clasp-Run-Id": "X-Paperclip-Run-Id"}[h]
		e := wantErr(t, b.do("POST", "/api/issues/"+iss.ID+"/checkout", req{token: key, headers: map[string]string{h: missing}, body: body}),
			http.StatusUnprocessableEntity, clasp.CodeRunNotFound, "")
		if !strings.Contains(e.Error, h) || strings.Contains(e.Error, other) {
			t.Errorf("run named by %s: %q, want only that header named", h, e.Error)
		}
	}
}
