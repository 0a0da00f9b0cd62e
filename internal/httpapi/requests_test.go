package httpapi

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
)

// Malformed requests: references, query strings, paths and bodies each get a JSON error and change nothing.

// TestNULInIssueReferenceIsRefused: an issue reference holding NUL or
// invalid UTF-8 (/api/issues/%00) is no issue reference: 400
// invalid_request naming id on every route, on PostgreSQL too, which
// refuses such text parameters (they never reach it). A wake naming such
// an issue is 400 naming issueId.
func TestNULInIssueReferenceIsRefused(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, b *bundle) {
		w := b.world("NU")
		for _, ref := range []string{"%00", "NU-%00", "a%00b", "%ff%fe"} {
			wantErr(t, b.do("GET", "/api/issues/"+ref, req{}), http.StatusBadRequest, clasp.CodeInvalidRequest, "id")
			wantErr(t, b.do("PATCH", "/api/issues/"+ref, req{body: map[string]any{"title": "x"}}), http.StatusBadRequest, clasp.CodeInvalidRequest, "id")
			wantErr(t, b.do("GET", "/api/issues/"+ref+"/activity", req{}), http.StatusBadRequest, clasp.CodeInvalidRequest, "id")
			wantErr(t, b.checkout(ref, w.ka, w.ra1.ID, w.a.ID, clasp.IssueTodo), http.StatusBadRequest, clasp.CodeInvalidRequest, "id")
		}
		wantErr(t, b.do("POST", "/api/agents/"+w.a.ID+"/wakeup", req{body: map[string]any{"issueId": "a\u0000"}}),
			http.StatusBadRequest, clasp.CodeInvalidRequest, "issueId")
	})
}

// TestMalformedQueryIsRefused: a malformed query string (?cursor=%%%) is
// 400 invalid_request naming query, never parsed in part and answered as
// the first page.
func TestMalformedQueryIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	co := b.company("MQ")
	wantErr(t, b.do("GET", "/api/companies/"+co.ID+"/issues?cursor=%%%", req{}), http.StatusBadRequest, clasp.CodeInvalidRequest, "query")
	b.must(http.StatusOK, "GET", "/api/companies/"+co.ID+"/issues?limit=5", req{}, nil)
}

// TestUncleanPathIsJSON404: a path with an empty segment (/api//companies)
// is a JSON 404 whose details name the clean path (cleanPath), not a
// redirect (which a client following it would answer by re-sending its
// POST).
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

// TestBodyNeverArrivesAnswers408: a request body that stops arriving (a
// Content-Length of 100 and 4 bytes sent) is cut by the body read deadline
// (Config.BodyReadTimeout): 408 request_timeout as a JSON error, with
// Connection: close, then the server closes the connection (the client
// reads EOF), and nothing is created.
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
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	// The server closes the connection after the answer: the next read
	// ends with EOF, not with the safety net's deadline.
	if n, err := br.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("read after the 408: %d bytes, error %v; want EOF (the server closed the connection)", n, err)
	}
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

// TestRefusedBeforeBodyAnswersAtOnce: a request refused before its body is
// read (bad or missing token, unknown path) is answered at once with
// Connection: close even when its body never arrives (net/http would
// otherwise wait for the rest of the body before replying). The body read
// deadline is 1 hour here, so the answer cannot come from it.
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

// TestIssueActivityFiltersByEntityID: entityId on an issue's activity is
// applied, not read and ignored: the issue's own id keeps its rows,
// another entity's id (another issue's) keeps none, and a value that is
// no UUID is 400 naming entityId; the company's activity filters the same.
func TestIssueActivityFiltersByEntityID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	co := b.company("EA")
	one := b.issue(co.ID, map[string]any{"title": "one"})
	two := b.issue(co.ID, map[string]any{"title": "two"})
	rowsOf := func(path string) []clasp.Activity {
		t.Helper()
		return *decode[[]clasp.Activity](t, b.must(http.StatusOK, "GET", path, req{}, nil))
	}
	all := rowsOf("/api/issues/" + one.ID + "/activity")
	if len(all) == 0 {
		t.Fatalf("issue %s has no activity, want its creation", one.ID)
	}
	if got := rowsOf("/api/issues/" + one.ID + "/activity?entityId=" + one.ID); len(got) != len(all) {
		t.Errorf("entityId = the issue: %d rows, want its %d", len(got), len(all))
	}
	if got := rowsOf("/api/issues/" + one.ID + "/activity?entityId=" + two.ID); len(got) != 0 {
		t.Errorf("entityId = another issue: %d rows, want none (the filter is applied)", len(got))
	}
	wantErr(t, b.do("GET", "/api/issues/"+one.ID+"/activity?entityId=nope", req{}), http.StatusBadRequest, clasp.CodeInvalidRequest, "entityId")
	for _, a := range rowsOf("/api/companies/" + co.ID + "/activity?entityId=" + two.ID) {
		if a.EntityID != two.ID {
			t.Errorf("company activity with entityId=%s holds a row of %s", two.ID, a.EntityID)
		}
	}
}

// TestCompressedOrBOMBodyRefusedAndSaidSo: a write whose body is
// gzip-compressed (Content-Encoding: gzip) answers 415 naming
// Content-Encoding, with Accept-Encoding: identity, instead of a 400 about
// the UTF-8 of the compressed bytes; Content-Encoding: identity is a plain
// body. A body that starts with a UTF-8 byte order mark answers 400 saying
// so, instead of a JSON syntax error. Neither refusal creates anything.
func TestCompressedOrBOMBodyRefusedAndSaidSo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	co := b.company("CE")
	path := "/api/companies/" + co.ID + "/issues"
	plain := []byte(`{"title":"compressed"}`)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(plain); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	for _, enc := range []string{"gzip", "GZIP", "identity, gzip", "br"} {
		r := b.do("POST", path, req{raw: gz.Bytes(), headers: map[string]string{"Content-Type": "application/json", "Content-Encoding": enc}})
		e := wantErr(t, r, http.StatusUnsupportedMediaType, clasp.CodeUnsupportedMediaType, "Content-Encoding")
		if !strings.Contains(e.Error, "Content-Encoding") || strings.Contains(e.Error, "UTF-8") {
			t.Errorf("Content-Encoding %q: message %q, want it to name Content-Encoding", enc, e.Error)
		}
		if got := r.header.Get("Accept-Encoding"); got != "identity" {
			t.Errorf("Content-Encoding %q: Accept-Encoding %q, want identity", enc, got)
		}
	}
	bom := append([]byte("\xef\xbb\xbf"), plain...)
	e := wantErr(t, b.do("POST", path, req{raw: bom, headers: map[string]string{"Content-Type": "application/json"}}), http.StatusBadRequest, clasp.CodeInvalidRequest, "")
	if !strings.Contains(e.Error, "byte order mark") || strings.Contains(e.Error, "invalid character") {
		t.Errorf("body with a BOM: message %q, want it to name the byte order mark", e.Error)
	}
	var issues []*clasp.Issue
	b.must(http.StatusOK, "GET", path, req{}, &issues)
	if len(issues) != 0 {
		t.Errorf("%d issues after the refused writes, want 0", len(issues))
	}
	b.must(http.StatusCreated, "POST", path, req{raw: plain, headers: map[string]string{"Content-Type": "application/json", "Content-Encoding": "identity"}}, nil)
}
