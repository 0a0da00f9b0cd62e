package client_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// The calls of server-managed agents: what they send, and how a run log (text, not JSON) is read.
func TestManagedAgentCalls(t *testing.T) {
	var got []string
	c := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+string(body)+" "+r.Header.Get("Idempotency-Key"))
		switch r.URL.Path {
		case "/api/runs/r1/log":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("X-Clasp-Log-Size", "11")
			w.Header().Set("X-Clasp-Run-Status", "running")
			_, _ = io.WriteString(w, "lo world\n")
		case "/api/agents/a1/wakeup":
			writeJSON(w, http.StatusAccepted, map[string]any{"wakeId": "w1", "status": "queued", "runId": "r1"})
		case "/api/runs/r1/cancel":
			writeJSON(w, http.StatusOK, map[string]any{"id": "r1", "status": "cancelled"})
		default:
			writeJSON(w, http.StatusOK, map[string]any{"id": "a1", "adapter": nil})
		}
	})
	ctx := context.Background()
	if _, err := c.AgentSetAdapter(ctx, "a1", &clasp.AdapterConfig{Type: "process", Command: "/bin/true"}); err != nil {
		t.Fatal(err)
	}
	ag, err := c.AgentSetAdapter(ctx, "a1", nil)
	if err != nil || ag.ID != "a1" || ag.Adapter != nil {
		t.Fatalf("AgentSetAdapter(nil) = %+v, %v", ag, err)
	}
	wk, err := c.AgentWake(client.WithIdempotencyKey(ctx, "hk"), "a1", client.WakeRequest{IssueID: "ENG-1"})
	if err != nil || wk.Status != "queued" || wk.RunID == nil || *wk.RunID != "r1" {
		t.Fatalf("AgentWake = %+v, %v", wk, err)
	}
	chunk, err := c.RunLog(ctx, "r1", 2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&client.RunLogChunk{Data: []byte("lo world\n"), Size: 11, Status: clasp.RunRunning}, chunk); diff != "" {
		t.Errorf("RunLog (-want +got):\n%s", diff)
	}
	run, err := c.RunCancel(ctx, "r1")
	if err != nil || run.Status != clasp.RunCancelled {
		t.Fatalf("RunCancel = %+v, %v", run, err)
	}
	want := []string{
		`PATCH /api/agents/a1 {"adapter":{"type":"process","command":"/bin/true","args":null,"cwd":"","env":null,"timeoutSec":0,"heartbeat":{"enabled":false,"intervalSec":0,"wakeOnAssignment":false,"maxConcurrentRuns":0}}} `,
		`PATCH /api/agents/a1 {"adapter":null} `,
		`POST /api/agents/a1/wakeup {"issueId":"ENG-1"} hk`,
		`GET /api/runs/r1/log?offset=2  `,
		`POST /api/runs/r1/cancel {} `,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}
