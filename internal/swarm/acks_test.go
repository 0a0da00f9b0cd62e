package swarm

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clasp-dev/clasp"
)

// TestCheckAcks feeds checkAcks a log and acknowledged writes, one per way
// an acknowledged write can be missing from the database, and checks that
// each is named and the others are not.
func TestCheckAcks(t *testing.T) {
	t.Parallel()
	ptr := func(s string) *string { return &s }
	row := func(id int64, issue, action, run, details string) *clasp.Activity {
		return &clasp.Activity{ID: id, Action: action, EntityType: "issue", EntityID: issue, RunID: ptr(run), Details: json.RawMessage(details)}
	}
	issues := []*clasp.Issue{
		{ID: "i1", Identifier: "SW-1", Status: clasp.IssueDone, CheckoutEpoch: 2},
		{ID: "i2", Identifier: "SW-2", Status: clasp.IssueInProgress, CheckoutEpoch: 1},
	}
	acts := []*clasp.Activity{
		row(1, "i1", clasp.ActionIssueCheckedOut, "r1", `{"runId":"r1","checkoutEpoch":1}`),
		row(2, "i1", clasp.ActionIssueCheckedOut, "r2", `{"runId":"r2","checkoutEpoch":2}`),
		row(3, "i1", clasp.ActionIssueUpdated, "r2", `{"changes":{"status":{"from":"in_progress","to":"done"}}}`),
		row(4, "i2", clasp.ActionIssueCheckedOut, "r3", `{"runId":"r3","checkoutEpoch":1}`),
	}
	acks := []Ack{
		{Op: EventCheckedOut, Issue: "SW-1", Run: "r1", Epoch: 1}, // fine
		{Op: EventCheckedOut, Issue: "SW-1", Run: "r2", Epoch: 2}, // fine
		{Op: EventDone, Issue: "SW-1", Run: "r2", Epoch: 2},       // fine
		{Op: EventCheckedOut, Issue: "SW-2", Run: "r3", Epoch: 2}, // no such row; epoch above the issue's
		{Op: EventDone, Issue: "SW-2", Run: "r3", Epoch: 1},       // not done
		{Op: EventDone, Issue: "SW-1", Run: "r1", Epoch: 1},       // done by another run
		{Op: EventCheckedOut, Issue: "SW-9", Run: "r1", Epoch: 1}, // no such issue
	}
	var got []string
	n := checkAcks(acks, acts, issues, func(issue, check, format string, args ...any) {
		if check != CheckAck {
			t.Errorf("check %q, want %q", check, CheckAck)
		}
		got = append(got, issue+": "+fmt.Sprintf(format, args...))
	})
	if n != len(acks) {
		t.Errorf("checked %d acks, want %d", n, len(acks))
	}
	want := []string{
		"SW-2: run r3 saw its checkout answered 200 with epoch 2, but no issue.checked_out row of that run has that epoch",
		"SW-2: run r3 saw its checkout answered 200 with epoch 2, but checkoutEpoch is 1",
		"SW-2: run r3 saw its result and status done acknowledged, but the status is in_progress",
		"SW-1: run r1 saw its PATCH to done acknowledged, but the log has the issue set done in run(s) [r2]",
		"SW-9: an agent saw checked_out acknowledged in run r1, but the issue is not listed",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("violations (-want +got):\n%s", d)
	}
}

// TestAckFromEvent reads acks from the event lines the worker prints.
func TestAckFromEvent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		line string
		want Ack
		ok   bool
	}{
		{"event=checked_out issue=SW-3 run=r1 epoch=4 from=todo", Ack{Op: EventCheckedOut, Issue: "SW-3", Run: "r1", Epoch: 4}, true},
		{"event=done issue=SW-3 run=r1 epoch=4 sha256=abc", Ack{Op: EventDone, Issue: "SW-3", Run: "r1", Epoch: 4}, true},
		{"event=checked_out issue=SW-3 run=r1", Ack{}, false},
		{"event=conflict issue=SW-3 run=r1 reason=held_by_live_run", Ack{}, false},
	} {
		ev, ok := ParseEvent(tc.line)
		if !ok {
			t.Fatalf("ParseEvent(%q) failed", tc.line)
		}
		got, ok := ackFromEvent(ev)
		if ok != tc.ok || got != tc.want {
			t.Errorf("ackFromEvent(%q) = %+v, %v; want %+v, %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

// TestFailoverTransport sends requests through a list whose first replica
// refuses connections: they reach the second, including a request with a
// body, and later requests stay there.
func TestFailoverTransport(t *testing.T) {
	t.Parallel()
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, b)
	}))
	defer live.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now: connections are refused

	hc, err := newFailoverClient([]string{dead, live.URL}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer hc.CloseIdleConnections()
	for i, body := range []string{`{"a":1}`, "", `{"b":2}`} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, dead+"/api/x", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := "POST /api/x " + body; string(got) != want {
			t.Errorf("request %d answered %q, want %q", i, got, want)
		}
	}
}
