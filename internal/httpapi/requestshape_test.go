package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/clasp-dev/clasp"
)

// TestIssuePatchNullRefused: a PATCH field that has no null (title,
// status, priority, comment) given as null answers 400 naming the field
// and what it takes, and writes nothing; description and assigneeAgentId
// keep their null (clear).
func TestIssuePatchNullRefused(t *testing.T) {
	b := setup(t)
	w := b.world("NUL")
	iss := b.issue(w.c.ID, map[string]any{"title": "keep me", "description": "d", "assigneeAgentId": w.a.ID})
	before := b.getIssue(iss.ID)
	for _, field := range []string{"title", "status", "priority", "comment"} {
		r := b.do("PATCH", "/api/issues/"+iss.ID, req{raw: []byte(`{"` + field + `":null}`)})
		e := wantErr(t, r, http.StatusBadRequest, clasp.CodeInvalidRequest, field)
		if e.Error == "" || !strings.Contains(e.Error, "cannot be null") {
			t.Errorf("%s: null: message %q, want it to say the field cannot be null", field, e.Error)
		}
	}
	// Combined with a valid field, the whole PATCH is refused.
	wantErr(t, b.do("PATCH", "/api/issues/"+iss.ID, req{raw: []byte(`{"priority":"high","title":null}`)}), http.StatusBadRequest, clasp.CodeInvalidRequest, "title")
	sameIssue(t, before, b.getIssue(iss.ID))

	var got clasp.Issue
	b.must(http.StatusOK, "PATCH", "/api/issues/"+iss.ID, req{raw: []byte(`{"description":null,"assigneeAgentId":null}`)}, &got)
	if got.Description != "" || got.AssigneeAgentID != nil || got.Title != "keep me" {
		t.Errorf("null description and assignee: %+v, want both cleared and the title kept", got)
	}
}

// TestPageParamsGivenTwice: limit or cursor given twice is a 400 naming
// it (which one would win is a guess), not the first silently taken.
func TestPageParamsGivenTwice(t *testing.T) {
	b := setup(t)
	w := b.world("TWI")
	b.issue(w.c.ID, map[string]any{"title": "one"})
	base := "/api/companies/" + w.c.ID + "/issues"
	wantErr(t, b.do("GET", base+"?limit=1&limit=2000", req{}), http.StatusBadRequest, clasp.CodeInvalidRequest, "limit")
	wantErr(t, b.do("GET", base+"?cursor=a&cursor=b", req{}), http.StatusBadRequest, clasp.CodeInvalidRequest, "cursor")
	b.must(http.StatusOK, "GET", base+"?limit=1", req{}, nil)
}

// TestSingleHeadersGivenTwice: a second Authorization, run header,
// Idempotency-Key or Content-Type answers 400 naming the header, whichever
// value comes first, and nothing is written.
func TestSingleHeadersGivenTwice(t *testing.T) {
	b := setup(t)
	w := b.world("HDR")
	iss := b.issue(w.c.ID, map[string]any{"title": "t", "status": "todo"})
	before := b.getIssue(iss.ID)
	path := "/api/issues/" + iss.ID + "/checkout"
	body := `{"agentId":"` + w.a.ID + `","expectedStatuses":["todo"]}`
	for name, hdr := range map[string][][2]string{
		"Authorization": {{"Authorization", "Bearer " + w.ka}, {"Authorization", "Bearer " + b.board}, {RunIDHeader, w.ra1.ID}},
		RunIDHeader:     {{"Authorization", "Bearer " + w.ka}, {RunIDHeader, w.ra1.ID}, {RunIDHeader, w.ra2.ID}},
		"Idempotency-Key": {{"Authorization", "Bearer " + w.ka}, {RunIDHeader, w.ra1.ID},
			{"Idempotency-Key", "a"}, {"Idempotency-Key", "b"}},
		"Content-Type": {{"Authorization", "Bearer " + w.ka}, {RunIDHeader, w.ra1.ID}, {"Content-Type", "text/plain"}},
	} {
		hr, err := http.NewRequest("POST", b.ts.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		hr.Header.Set("Content-Type", "application/json")
		for _, kv := range hdr {
			hr.Header.Add(kv[0], kv[1])
		}
		res, err := b.hc.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		var e errorBody
		_ = json.NewDecoder(res.Body).Decode(&e)
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest || e.Code != clasp.CodeInvalidRequest || e.Details["field"] != name {
			t.Errorf("%s twice: %d %+v, want 400 invalid_request naming %s", name, res.StatusCode, e, name)
		}
	}
	sameIssue(t, before, b.getIssue(iss.ID))
}
