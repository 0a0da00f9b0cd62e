package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newServer starts an httptest server with h and returns a client of it.
func newServer(t *testing.T, h http.HandlerFunc, opts ...client.Option) *client.Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return client.New(srv.URL, append([]client.Option{client.WithHTTPClient(srv.Client())}, opts...)...)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// hangUp closes the connection without answering (a connection error).
func hangUp(t *testing.T, w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return
	}
	conn.Close()
}

func conflictBody(reason string) map[string]any {
	return map[string]any{
		"error": "ENG-1 is checked out by another run.",
		"code":  "checkout_conflict",
		"details": map[string]any{
			"issueId": "11111111-1111-1111-1111-111111111111", "status": "in_progress",
			"assigneeAgentId": "a1", "checkoutRunId": "r1", "executionRunId": "r1", "reason": reason,
		},
	}
}

func TestErrorDecoding(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ConflictJSON", func(t *testing.T) {
		t.Parallel()
		c := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusConflict, conflictBody(clasp.ReasonHeldByLiveRun))
		})
		_, err := c.IssueCheckout(ctx, "ENG-1", client.CheckoutRequest{AgentID: "a2", ExpectedStatuses: []clasp.IssueStatus{clasp.IssueTodo}})
		if got := clasp.ErrorCode(err); got != clasp.CodeCheckoutConflict {
			t.Fatalf("ErrorCode = %q, want %q (err %v)", got, clasp.CodeCheckoutConflict, err)
		}
		e := clasp.AsError(err)
		if e.Status != http.StatusConflict {
			t.Errorf("Status = %d, want 409", e.Status)
		}
		if got := e.Details["checkoutRunId"]; got != "r1" {
			t.Errorf("details.checkoutRunId = %v, want r1", got)
		}
		if e.Message != "ENG-1 is checked out by another run." {
			t.Errorf("Message = %q", e.Message)
		}
		if !client.IsConflict(err) {
			t.Errorf("IsConflict = false, want true")
		}
	})

	t.Run("NotJSON", func(t *testing.T) {
		t.Parallel()
		c := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "upstream down", http.StatusBadGateway)
		})
		_, err := c.IssueGet(ctx, "ENG-1")
		e := clasp.AsError(err)
		if e == nil {
			t.Fatalf("err = %v (%T), want *clasp.Error", err, err)
		}
		want := &clasp.Error{Code: clasp.CodeInternal, Message: "Bad Gateway: upstream down", Details: map[string]any{}, Status: http.StatusBadGateway}
		if diff := cmp.Diff(want, e); diff != "" {
			t.Errorf("error (-want +got):\n%s", diff)
		}
		if client.IsConflict(err) {
			t.Errorf("IsConflict = true for a 502")
		}
	})

	t.Run("JSONWithoutDetails", func(t *testing.T) {
		t.Parallel()
		c := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusNotFound, map[string]any{"error": "No such issue.", "code": "not_found"})
		})
		_, err := c.IssueGet(ctx, "ENG-404")
		e := clasp.AsError(err)
		if e == nil || e.Code != clasp.CodeNotFound || e.Status != 404 || e.Details == nil {
			t.Fatalf("err = %#v, want not_found 404 with non-nil details", e)
		}
		if !client.IsNotFound(err) {
			t.Errorf("IsNotFound = false")
		}
	})

	t.Run("ConnectionRefused", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		_, err := client.New(url).CompanyList(ctx, client.ListParams{})
		if err == nil || clasp.AsError(err) != nil {
			t.Fatalf("err = %v, want a transport error that is not a *clasp.Error", err)
		}
	})
}

func TestRequestHeadersAndBody(t *testing.T) {
	t.Parallel()
	type seen struct {
		Method, Path, Query, Auth, Run, UA, CT string
		Body                                   map[string]any
	}
	var mu sync.Mutex
	var got []seen
	c := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		if len(b) > 0 {
			if err := json.Unmarshal(b, &body); err != nil {
				t.Errorf("body %q: %v", b, err)
			}
		}
		mu.Lock()
		got = append(got, seen{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Get("Authorization"),
			r.Header.Get(client.RunIDHeader), r.Header.Get("User-Agent"), r.Header.Get("Content-Type"), body})
		mu.Unlock()
		if r.Method == http.MethodGet {
			writeJSON(w, http.StatusOK, []any{})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": "x"})
	}, client.WithToken("clasp_ak_1"), client.WithUserAgent("test/1"))

	ctx := context.Background()
	bound := c.WithRun("run-1")
	done := clasp.IssueDone
	comment := "result"
	if _, err := bound.IssueUpdate(ctx, "ENG-1", client.IssueUpdateRequest{Status: &done, Comment: &comment, Unassign: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.IssueList(ctx, "c 1", client.IssueListParams{Statuses: []clasp.IssueStatus{clasp.IssueTodo, clasp.IssueBlocked}, Limit: 5}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WithToken("clasp_bt_x").IssueRelease(ctx, "ENG/2", client.ReleaseRequest{}); err != nil {
		t.Fatal(err)
	}
	want := []seen{
		{"PATCH", "/api/issues/ENG-1", "", "Bearer clasp_ak_1", "run-1", "test/1 clasp-go-client/" + clasp.Version(), "application/json",
			map[string]any{"status": "done", "comment": "result", "assigneeAgentId": nil}},
		{"GET", "/api/companies/c%201/issues", "limit=5&status=todo%2Cblocked", "Bearer clasp_ak_1", "", "test/1 clasp-go-client/" + clasp.Version(), "", nil},
		{"POST", "/api/issues/ENG%2F2/release", "", "Bearer clasp_bt_x", "", "test/1 clasp-go-client/" + clasp.Version(), "application/json", map[string]any{}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if c.RunID() != "" {
		t.Errorf("WithRun changed the original client: RunID = %q", c.RunID())
	}
}

func TestIssueUpdateRequestJSON(t *testing.T) {
	t.Parallel()
	a := "agent-b"
	title := "new"
	for _, tc := range []struct {
		name string
		req  client.IssueUpdateRequest
		want string
	}{
		{"Empty", client.IssueUpdateRequest{}, `{}`},
		{"Assign", client.IssueUpdateRequest{AssigneeAgentID: &a}, `{"assigneeAgentId":"agent-b"}`},
		{"Unassign", client.IssueUpdateRequest{Unassign: true, AssigneeAgentID: &a}, `{"assigneeAgentId":null}`},
		{"Title", client.IssueUpdateRequest{Title: &title}, `{"title":"new"}`},
	} {
		b, err := json.Marshal(tc.req)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, b, tc.want)
		}
	}
}

func TestLinkPagination(t *testing.T) {
	t.Parallel()
	// Three pages of issues; the server links relative URLs with a cursor.
	var requests atomic.Int32
	c := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if r.URL.Path != "/api/companies/c1/issues" {
			http.NotFound(w, r)
			return
		}
		page, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
		if r.URL.Query().Get("status") != "todo" {
			t.Errorf("page %d: status filter %q lost", page, r.URL.Query().Get("status"))
		}
		if page < 2 {
			next := fmt.Sprintf("/api/companies/c1/issues?status=todo&limit=2&cursor=%d", page+1)
			w.Header().Add("Link", `<https://other.example/x>; rel="prev", <`+next+`>; rel="next"`)
		}
		writeJSON(w, http.StatusOK, []map[string]any{
			{"id": fmt.Sprintf("i%da", page), "identifier": "ENG-" + strconv.Itoa(page*2+1)},
			{"id": fmt.Sprintf("i%db", page), "identifier": "ENG-" + strconv.Itoa(page*2+2)},
		})
	})
	ctx := context.Background()
	first, err := c.IssueList(ctx, "c1", client.IssueListParams{Statuses: []clasp.IssueStatus{clasp.IssueTodo}, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !first.HasNext() || first.NextCursor() != "1" {
		t.Fatalf("first page: HasNext %v, NextCursor %q, want true, 1", first.HasNext(), first.NextCursor())
	}
	all, err := first.All(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, iss := range all {
		ids = append(ids, iss.ID)
	}
	want := []string{"i0a", "i0b", "i1a", "i1b", "i2a", "i2b"}
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("ids (-want +got):\n%s", diff)
	}
	if n := requests.Load(); n != 3 {
		t.Errorf("requests = %d, want 3", n)
	}
	last, err := first.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	last, err = last.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if last.HasNext() || last.NextCursor() != "" {
		t.Errorf("last page: HasNext %v, NextCursor %q", last.HasNext(), last.NextCursor())
	}
	end, err := last.Next(ctx)
	if err != nil || len(end.Items) != 0 {
		t.Errorf("Next after last: %d items, err %v; want 0, nil", len(end.Items), err)
	}
}

// checkoutServer answers checkout attempts with the responses in answers
// (the last one repeats) and counts them.
func checkoutServer(t *testing.T, attempts *atomic.Int32, answers ...func(http.ResponseWriter)) *client.Client {
	t.Helper()
	return newServer(t, func(w http.ResponseWriter, r *http.Request) {
		n := int(attempts.Add(1))
		if n > len(answers) {
			n = len(answers)
		}
		answers[n-1](w)
	})
}

func conflict(reason string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) { writeJSON(w, http.StatusConflict, conflictBody(reason)) }
}

func ok(w http.ResponseWriter) {
	writeJSON(w, http.StatusOK, map[string]any{"id": "i1", "identifier": "ENG-1", "status": "in_progress", "checkoutRunId": "r2", "checkoutEpoch": 2})
}

func TestCheckoutWithRetry(t *testing.T) {
	t.Parallel()
	fast := client.Backoff{Initial: time.Millisecond, Max: 2 * time.Millisecond}
	req := client.CheckoutRequest{AgentID: "a1", ExpectedStatuses: []clasp.IssueStatus{clasp.IssueTodo}}
	ctx := context.Background()

	t.Run("HeldByLiveRunThenFree", func(t *testing.T) {
		t.Parallel()
		var attempts atomic.Int32
		c := checkoutServer(t, &attempts, conflict(clasp.ReasonHeldByLiveRun), conflict(clasp.ReasonHeldByLiveRun), ok)
		iss, err := c.CheckoutWithRetry(ctx, "ENG-1", req, fast)
		if err != nil {
			t.Fatal(err)
		}
		if iss.CheckoutEpoch != 2 || *iss.CheckoutRunID != "r2" {
			t.Errorf("issue = %+v", iss)
		}
		if n := attempts.Load(); n != 3 {
			t.Errorf("attempts = %d, want 3", n)
		}
	})

	for _, reason := range []string{clasp.ReasonAssignedToOtherAgent, clasp.ReasonStatusNotExpected} {
		t.Run("NotTransient/"+reason, func(t *testing.T) {
			t.Parallel()
			var attempts atomic.Int32
			c := checkoutServer(t, &attempts, conflict(reason), ok)
			_, err := c.CheckoutWithRetry(ctx, "ENG-1", req, fast)
			if clasp.ErrorCode(err) != clasp.CodeCheckoutConflict {
				t.Fatalf("err = %v, want checkout_conflict", err)
			}
			if n := attempts.Load(); n != 1 {
				t.Errorf("attempts = %d, want 1", n)
			}
		})
	}

	t.Run("OtherErrorNotRetried", func(t *testing.T) {
		t.Parallel()
		var attempts atomic.Int32
		c := checkoutServer(t, &attempts, func(w http.ResponseWriter) {
			writeJSON(w, http.StatusForbidden, map[string]any{"error": "Not you.", "code": "agent_mismatch", "details": map[string]any{}})
		})
		_, err := c.CheckoutWithRetry(ctx, "ENG-1", req, fast)
		if clasp.ErrorCode(err) != clasp.CodeAgentMismatch || attempts.Load() != 1 {
			t.Errorf("err = %v after %d attempts, want agent_mismatch after 1", err, attempts.Load())
		}
	})

	t.Run("MaxAttempts", func(t *testing.T) {
		t.Parallel()
		var attempts atomic.Int32
		c := checkoutServer(t, &attempts, conflict(clasp.ReasonHeldByLiveRun))
		b := fast
		b.MaxAttempts = 4
		_, err := c.CheckoutWithRetry(ctx, "ENG-1", req, b)
		if !client.IsConflict(err) || clasp.AsError(err).Details["checkoutRunId"] != "r1" {
			t.Errorf("err = %v, want the last conflict naming r1", err)
		}
		if n := attempts.Load(); n != 4 {
			t.Errorf("attempts = %d, want 4", n)
		}
	})

	t.Run("ContextEnds", func(t *testing.T) {
		t.Parallel()
		var attempts atomic.Int32
		c := checkoutServer(t, &attempts, conflict(clasp.ReasonHeldByLiveRun))
		ctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
		defer cancel()
		_, err := c.CheckoutWithRetry(ctx, "ENG-1", req, fast)
		if clasp.ErrorCode(err) != clasp.CodeCheckoutConflict {
			t.Errorf("err = %v, want the last checkout_conflict", err)
		}
		if attempts.Load() < 1 {
			t.Errorf("no attempt made")
		}
	})

	t.Run("ConnectionErrorRetried", func(t *testing.T) {
		t.Parallel()
		var attempts atomic.Int32
		c := checkoutServer(t, &attempts, func(w http.ResponseWriter) { hangUp(t, w) }, ok)
		if _, err := c.CheckoutWithRetry(ctx, "ENG-1", req, fast); err != nil {
			t.Fatal(err)
		}
		if n := attempts.Load(); n != 2 {
			t.Errorf("attempts = %d, want 2", n)
		}
	})
}

func TestBackoffDelay(t *testing.T) {
	t.Parallel()
	b := client.Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond, Multiplier: 2, Jitter: -1}
	var got []time.Duration
	for n := range 5 {
		got = append(got, b.Delay(n))
	}
	want := []time.Duration{10, 20, 40, 50, 50}
	for i := range want {
		want[i] *= time.Millisecond
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("delays without jitter (-want +got):\n%s", diff)
	}
	j := client.Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2, Jitter: 0.5}
	for range 100 {
		if d := j.Delay(1); d < 100*time.Millisecond || d > 200*time.Millisecond {
			t.Fatalf("jittered Delay(1) = %v, want within [100ms, 200ms]", d)
		}
	}
}

func TestIdempotentCreate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("RetriedWithKey", func(t *testing.T) {
		t.Parallel()
		var mu sync.Mutex
		var keys []string
		c := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			keys = append(keys, r.Header.Get(client.IdempotencyKeyHeader))
			n := len(keys)
			mu.Unlock()
			if n == 1 {
				hangUp(t, w)
				return
			}
			writeJSON(w, http.StatusCreated, map[string]any{"id": "i1", "identifier": "ENG-1", "title": "t"})
		})
		iss, err := c.IssueCreate(client.WithIdempotencyKey(ctx, "k-1"), "c1", client.IssueCreateRequest{Title: "t"})
		if err != nil {
			t.Fatal(err)
		}
		if iss.Identifier != "ENG-1" {
			t.Errorf("identifier = %q", iss.Identifier)
		}
		if diff := cmp.Diff([]string{"k-1", "k-1"}, keys); diff != "" {
			t.Errorf("Idempotency-Key per attempt (-want +got):\n%s", diff)
		}
	})

	// IssueUpdate too (a PATCH {status: done, comment} whose answer was
	// lost): with a key it sends it on every attempt and retries; without
	// one it sends none and does not retry.
	t.Run("UpdateRetriedWithKey", func(t *testing.T) {
		t.Parallel()
		var mu sync.Mutex
		var keys []string
		c := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			keys = append(keys, r.Method+" "+r.Header.Get(client.IdempotencyKeyHeader))
			n := len(keys)
			mu.Unlock()
			if n == 1 {
				hangUp(t, w)
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{"id": "i1", "identifier": "ENG-1", "status": "done"})
		})
		done := clasp.IssueDone
		iss, err := c.IssueUpdate(client.WithIdempotencyKey(ctx, "done-1"), "ENG-1", client.IssueUpdateRequest{Status: &done})
		if err != nil || iss.Status != clasp.IssueDone {
			t.Fatalf("IssueUpdate = %+v, %v, want done", iss, err)
		}
		if diff := cmp.Diff([]string{"PATCH done-1", "PATCH done-1"}, keys); diff != "" {
			t.Errorf("Idempotency-Key per attempt (-want +got):\n%s", diff)
		}
	})

	t.Run("UpdateNotRetriedWithoutKey", func(t *testing.T) {
		t.Parallel()
		var attempts atomic.Int32
		c := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			attempts.Add(1)
			if r.Header.Get(client.IdempotencyKeyHeader) != "" {
				t.Errorf("Idempotency-Key sent without being set")
			}
			hangUp(t, w)
		})
		done := clasp.IssueDone
		if _, err := c.IssueUpdate(ctx, "ENG-1", client.IssueUpdateRequest{Status: &done}); err == nil {
			t.Fatal("err = nil, want a connection error")
		}
		if n := attempts.Load(); n != 1 {
			t.Errorf("attempts = %d, want 1", n)
		}
	})

	t.Run("NotRetriedWithoutKey", func(t *testing.T) {
		t.Parallel()
		var attempts atomic.Int32
		c := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			attempts.Add(1)
			if r.Header.Get(client.IdempotencyKeyHeader) != "" {
				t.Errorf("Idempotency-Key sent without being set")
			}
			hangUp(t, w)
		})
		_, err := c.CommentCreate(ctx, "ENG-1", client.CommentCreateRequest{Body: "x"})
		if err == nil {
			t.Fatal("err = nil, want a connection error")
		}
		if n := attempts.Load(); n != 1 {
			t.Errorf("attempts = %d, want 1", n)
		}
	})

	t.Run("ServerErrorNotRetried", func(t *testing.T) {
		t.Parallel()
		var attempts atomic.Int32
		c := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			attempts.Add(1)
			writeJSON(w, 422, map[string]any{"error": "Key reused.", "code": "idempotency_key_reused", "details": map[string]any{}})
		})
		_, err := c.RunOpen(client.WithIdempotencyKey(ctx, client.NewIdempotencyKey()), client.RunOpenRequest{})
		if clasp.ErrorCode(err) != clasp.CodeIdempotencyKeyReused || attempts.Load() != 1 {
			t.Errorf("err = %v after %d attempts, want idempotency_key_reused after 1", err, attempts.Load())
		}
	})
}

func TestHealth(t *testing.T) {
	t.Parallel()
	c := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz":
			w.WriteHeader(http.StatusOK)
		default:
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "Database unreachable.", "code": "unavailable", "details": map[string]any{}})
		}
	})
	if err := c.Healthz(context.Background()); err != nil {
		t.Errorf("Healthz: %v", err)
	}
	err := c.Readyz(context.Background())
	if e := clasp.AsError(err); e == nil || e.Status != 503 || e.Code != clasp.CodeUnavailable {
		t.Errorf("Readyz = %v, want 503 unavailable", err)
	}
	var target *clasp.Error
	if !errors.As(err, &target) {
		t.Errorf("errors.As failed")
	}
}

// TestNotClaspAnswer: an HTML answer (another web server at the URL) is a
// *client.NotClaspError saying "that is not a clasp server", never quoting
// the page; for an error status it still unwraps to a *clasp.Error with the
// status, and a short plain-text body is quoted.
func TestNotClaspAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		status     int
		ctype, bod string
		wantStatus int // of the unwrapped *clasp.Error, 0 for none
		wantText   string
	}{
		{200, "text/html; charset=utf-8", "<html><body>It works!</body></html>", 0, ""},
		{404, "text/html", "<html><body>It works!</body></html>", 404, ""},
		{502, "text/plain", "upstream down", 502, "upstream down"},
	} {
		c := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", tc.ctype)
			w.WriteHeader(tc.status)
			_, _ = io.WriteString(w, tc.bod)
		})
		_, err := c.IssueGet(ctx, "ENG-1")
		var nc *client.NotClaspError
		if !errors.As(err, &nc) {
			t.Errorf("%d %s: err = %v (%T), want *client.NotClaspError", tc.status, tc.ctype, err, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "that is not a clasp server") || strings.Contains(msg, "It works") || nc.Text != tc.wantText {
			t.Errorf("%d %s: message %q, Text %q; want 'that is not a clasp server', no page, Text %q", tc.status, tc.ctype, msg, nc.Text, tc.wantText)
		}
		e := clasp.AsError(err)
		if tc.wantStatus == 0 && e != nil || tc.wantStatus != 0 && (e == nil || e.Status != tc.wantStatus) {
			t.Errorf("%d %s: clasp.AsError = %v, want status %d", tc.status, tc.ctype, e, tc.wantStatus)
		}
	}
}

// TestEventsResumeWhereTheStreamStarted: a stream that opened "from now"
// (no AfterID) and broke before any row reconnects with Last-Event-ID set
// to the id the first connection started after, so a row written while it
// was away is not skipped.
func TestEventsResumeWhereTheStreamStarted(t *testing.T) {
	t.Parallel()
	var conns atomic.Int32
	lastIDs := make(chan string, 4)
	c := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		lastIDs <- r.Header.Get("Last-Event-ID")
		w.Header().Set("Content-Type", "text/event-stream")
		switch conns.Add(1) {
		case 1: // opens from now (the newest row is 7), then breaks
			fmt.Fprint(w, ": clasp events for company co after 7\nretry: 2000\n\n")
			w.(http.Flusher).Flush()
			hangUp(t, w)
		default: // row 8 was written in between
			fmt.Fprint(w, ": clasp events for company co after 7\nretry: 2000\n\n")
			fmt.Fprint(w, "id: 8\nevent: issue.created\ndata: {\"id\":8,\"action\":\"issue.created\"}\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []int64
	var connects, reconnects int
	errDone := errors.New("done")
	opt := client.EventsOptions{AfterID: -1, MaxBackoff: 50 * time.Millisecond,
		OnConnect: func() { connects++ }, OnReconnect: func(error, time.Duration) { reconnects++ }}
	err := c.Events(ctx, "co", opt, func(a *clasp.Activity) error {
		got = append(got, a.ID)
		return errDone
	})
	if !errors.Is(err, errDone) {
		t.Fatalf("Events = %v, want the callback's error", err)
	}
	if !slices.Equal(got, []int64{8}) {
		t.Errorf("delivered ids %v, want [8]", got)
	}
	if connects != 2 || reconnects != 1 {
		t.Errorf("OnConnect called %d times and OnReconnect %d, want 2 and 1", connects, reconnects)
	}
	if first, second := <-lastIDs, <-lastIDs; first != "" || second != "7" {
		t.Errorf("Last-Event-ID of the two connections = %q, %q; want none, then 7", first, second)
	}
}
