package crashtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// exclusiveAgentScript is a managed agent's process that notices a second
// process working its issue: it takes the directory lock-<issue> in $DIR
// (mkdir is atomic) and, when another process holds it, writes
// double-<run>; it works 300 ms and exits 0.
const exclusiveAgentScript = `if ! mkdir "$DIR/lock-$CLASP_ISSUE_ID" 2>/dev/null; then : > "$DIR/double-$CLASP_RUN_ID"; fi
sleep 0.3
rmdir "$DIR/lock-$CLASP_ISSUE_ID" 2>/dev/null
exit 0`

// Parameters of TestReplicas_ManagedRunsAcrossReplicas.
const (
	instAgents = 8
	instRounds = 4
)

// TestReplicas_ManagedRunsAcrossReplicas: two real `clasp serve` processes
// on one machine and one PostgreSQL database, both running the heartbeat
// scheduler; each agent is woken for its own issue, the wakes alternating
// between the replicas, for several rounds. Each replica is its own
// instance, so neither judges the other's runs: every run must end
// succeeded (its process exited 0) on its first attempt, none lost while
// its process lived, no retry, and never two processes at once for one
// issue.
func TestReplicas_ManagedRunsAcrossReplicas(t *testing.T) {
	args := []string{"--data-dir", filepath.Join(t.TempDir(), "data"), "--database-url", postgresURL(t, "instances")}
	srvs := startReplicas(t, 2, args)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	hc := newHTTPClient()
	tok := boardToken(t, srvs...)
	boards := []*client.Client{
		client.New(srvs[0].URL(), client.WithToken(tok), client.WithHTTPClient(hc)),
		client.New(srvs[1].URL(), client.WithToken(tok), client.WithHTTPClient(hc)),
	}
	dir := t.TempDir()
	co, err := boards[0].CompanyCreate(ctx, client.CompanyCreateRequest{Name: "instances", IssuePrefix: randomPrefix("IN")})
	if err != nil {
		t.Fatal(err)
	}
	var agents []*clasp.Agent
	var issues []*clasp.Issue
	for i := range instAgents {
		a, err := boards[0].AgentCreate(ctx, co.ID, client.AgentCreateRequest{Name: fmt.Sprintf("managed-%02d", i+1), Role: "work"})
		if err != nil {
			t.Fatal(err)
		}
		cfg := &clasp.AdapterConfig{Type: clasp.AdapterProcess, Command: "/bin/sh", Args: []string{"-c", exclusiveAgentScript},
			Env: map[string]string{"DIR": dir}, Heartbeat: clasp.HeartbeatConfig{Enabled: true, MaxConcurrentRuns: 1}}
		if _, err := boards[0].AgentSetAdapter(ctx, a.ID, cfg); err != nil {
			t.Fatal(err)
		}
		iss, err := boards[0].IssueCreate(ctx, co.ID, client.IssueCreateRequest{Title: fmt.Sprintf("issue %d", i+1), Status: clasp.IssueTodo})
		if err != nil {
			t.Fatal(err)
		}
		agents, issues = append(agents, a), append(issues, iss)
	}
	live := func() (bool, error) {
		p, err := boards[0].RunList(ctx, co.ID, client.RunListParams{Statuses: []clasp.RunStatus{clasp.RunQueued, clasp.RunRunning}, Limit: 1000})
		if err != nil {
			return false, err
		}
		return len(p.Items) == 0, nil
	}
	for round := range instRounds {
		for i, a := range agents {
			w, err := boards[(i+round)%2].AgentWake(ctx, a.ID, client.WakeRequest{Reason: clasp.InvocationOnDemand, IssueID: issues[i].ID})
			if err != nil || w.Status != "queued" {
				t.Fatalf("round %d: wake agent %d = %+v, %v; want queued", round, i, w, err)
			}
		}
		waitFor(t, fmt.Sprintf("the runs of round %d to end", round), live)
	}

	p, err := boards[1].RunList(ctx, co.ID, client.RunListParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	hosts := map[string]int{}
	for _, r := range p.Items {
		if r.Status != clasp.RunSucceeded || r.Attempt != 1 || r.RetryOfRunID != nil {
			t.Errorf("run %s: %s (attempt %d, error %q), want succeeded on its first attempt", r.ID, r.Status, r.Attempt, str(r.Error))
		}
		hosts[str(r.HostID)]++
	}
	if len(p.Items) != instAgents*instRounds {
		t.Errorf("runs: got %d, want %d (one per wake, no retry)", len(p.Items), instAgents*instRounds)
	}
	if len(hosts) < 2 {
		t.Errorf("runs by instance: %v, want runs started by both replicas", hosts)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "double-") {
			t.Errorf("run %s's process found another process working its issue", strings.TrimPrefix(e.Name(), "double-"))
		}
	}
	lost, err := allActivity(ctx, boards[0], co.ID, clasp.ActionRunLost)
	if err != nil {
		t.Fatal(err)
	}
	if len(lost) != 0 {
		t.Errorf("run.lost rows: got %d, want 0 (no process died)", len(lost))
	}
}
