package board

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
)

// TestEveryActionReadsAsASentence: each activity action the server writes
// has a sentence of its own that names the agents, issues and runs of its
// details by name, never by id; an action the board does not know reads as
// a plain generic sentence.
func TestEveryActionReadsAsASentence(t *testing.T) {
	const (
		co    = "0191e0a4-0000-7000-8000-0000000000c1"
		agent = "0191e0a4-0000-7000-8000-0000000000a1"
		issue = "0191e0a4-0000-7000-8000-0000000000e1"
		run   = "0191e0a4-0000-7000-8000-0000000000f1"
		other = "0191e0a4-0000-7000-8000-0000000000f2"
	)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	l := &lookup{
		companyID: co,
		agents:    map[string]*clasp.Agent{agent: {ID: agent, Name: "builder"}},
		runs: map[string]*clasp.Run{
			run:   {ID: run, AgentID: agent, CreatedAt: at},
			other: {ID: other, AgentID: agent, CreatedAt: at.Add(time.Minute)},
		},
		idents: map[string]string{issue: "ACME-5"},
	}
	rows := []struct {
		action, entityType, entityID string
		details                      map[string]any
		want                         string
	}{
		{clasp.ActionIssueCreated, "issue", issue, map[string]any{"identifier": "ACME-5", "title": "Fix", "status": "todo", "priority": "high"}, "created ACME-5 “Fix” in todo, priority high"},
		{clasp.ActionIssueUpdated, "issue", issue, map[string]any{"changes": map[string]any{"status": map[string]any{"from": "todo", "to": "in_progress"}}}, "changed status from todo to in progress on ACME-5"},
		{clasp.ActionIssueUpdated, "issue", issue, map[string]any{"changes": map[string]any{"assigneeAgentId": map[string]any{"from": nil, "to": agent}}, "boardCheckout": true}, "checked out ACME-5 for builder from the board, to be taken by its agent's next run"},
		{clasp.ActionIssueCheckedOut, "issue", issue, map[string]any{"agentId": agent, "runId": run, "checkoutEpoch": 1}, "checked out ACME-5 at epoch 1 for builder in builder's run of 03:04:05"},
		{clasp.ActionIssueLockAdopted, "issue", issue, map[string]any{"previousCheckoutRunId": other, "why": "lease_expired"}, "adopted the lock of ACME-5 held by builder's run of 03:05:05 (lease expired)"},
		{clasp.ActionIssueReleased, "issue", issue, map[string]any{"previousCheckoutRunId": run, "unassigned": true}, "released ACME-5 and unassigned it"},
		{clasp.ActionIssueLockReleased, "issue", issue, map[string]any{"runId": run, "runStatus": "succeeded"}, "released the lock of ACME-5 when builder's run of 03:04:05 ended (succeeded)"},
		{clasp.ActionIssueStaleLockCleared, "issue", issue, map[string]any{"clearedCheckoutRunId": run, "why": "run_lost"}, "cleared the stale lock of ACME-5 held by builder's run of 03:04:05 (run lost)"},
		{clasp.ActionIssueForceRelease, "issue", issue, map[string]any{"previousCheckoutRunId": run, "reason": "stuck", "clearAssignee": true}, "force-released ACME-5 held by builder's run of 03:04:05 and cleared its assignee, saying “stuck”"},
		{clasp.ActionIssueCommented, "issue", issue, map[string]any{"commentId": "0191e0a4-0000-7000-8000-0000000000d1"}, "commented on ACME-5"},
		{clasp.ActionIssueExecutionLocked, "issue", issue, map[string]any{"runId": run}, "gave the execution lock of ACME-5 to builder's run of 03:04:05"},
		{clasp.ActionIssueLockMoved, "issue", issue, map[string]any{"fromRunId": run, "toRunId": other}, "moved the execution lock of ACME-5 from builder's run of 03:04:05 to its retry, builder's run of 03:05:05"},
		{clasp.ActionRunQueued, "run", other, map[string]any{"agentId": agent, "issueId": issue, "reason": "retry", "retryOfRunId": run, "attempt": 2}, "queued builder's run of 03:05:05 (retry) for ACME-5, attempt 2, retrying builder's run of 03:04:05"},
		{clasp.ActionRunStarted, "run", run, map[string]any{"agentId": agent, "invocationSource": "on_demand"}, "started builder's run of 03:04:05 (on demand)"},
		{clasp.ActionRunFinished, "run", run, map[string]any{"status": "failed", "exitCode": 2}, "ended builder's run of 03:04:05 as failed, exit code 2"},
		{clasp.ActionRunLost, "run", run, map[string]any{"agentId": agent, "errorCode": "lease_expired"}, "marked builder's run of 03:04:05 lost (lease expired)"},
		{clasp.ActionCompanyCreated, "company", co, map[string]any{"name": "Acme", "issuePrefix": "ACME"}, "created the company “Acme” with issue prefix ACME"},
		{clasp.ActionCompanyArchived, "company", co, map[string]any{"name": "Acme", "issuePrefix": "ACME"}, "archived the company"},
		{clasp.ActionCompanyUnarchived, "company", co, map[string]any{"name": "Acme", "issuePrefix": "ACME"}, "restored the company from the archive"},
		{clasp.ActionAgentCreated, "agent", agent, map[string]any{"name": "builder"}, "created the agent builder"},
		{clasp.ActionAgentUpdated, "agent", agent, map[string]any{"changes": map[string]any{"status": map[string]any{"from": "active", "to": "paused"}}}, "changed builder: status from active to paused"},
		{clasp.ActionAgentKeyCreated, "agent", agent, map[string]any{"keyId": "0191e0a4-0000-7000-8000-0000000000b1", "prefix": "clasp_ak_x1"}, "created the API key clasp_ak_x1… of builder"},
		{clasp.ActionAgentKeyRevoked, "agent", agent, map[string]any{"keyId": "0191e0a4-0000-7000-8000-0000000000b1", "prefix": "clasp_ak_x1"}, "revoked the API key clasp_ak_x1… of builder"},
		{clasp.ActionAgentAdapterSet, "agent", agent, map[string]any{"adapterType": "process"}, "set the adapter of builder to process"},
		{clasp.ActionWakeRequested, "agent", agent, map[string]any{"outcome": "deferred", "blockedByRunId": run}, "asked to wake builder: deferred, behind builder's run of 03:04:05"},
		{clasp.ActionWakePromoted, "agent", agent, map[string]any{"runId": other, "endedRunId": run}, "woke builder as asked earlier, in builder's run of 03:05:05, once builder's run of 03:04:05 ended"},
		{clasp.ActionIssueBlockerAdded, "issue", issue, map[string]any{"identifier": "ACME-5", "blockerIssueId": "0191e0a4-0000-7000-8000-0000000000e2", "blockerIdentifier": "ACME-3"}, "made ACME-5 wait for ACME-3"},
		{clasp.ActionIssueBlockerRemoved, "issue", issue, map[string]any{"identifier": "ACME-5", "blockerIssueId": "0191e0a4-0000-7000-8000-0000000000e2", "blockerIdentifier": "ACME-3"}, "stopped ACME-5 waiting for ACME-3"},
		{clasp.ActionIssueParentChanged, "issue", issue, map[string]any{"identifier": "ACME-5", "parentId": "0191e0a4-0000-7000-8000-0000000000e3", "parentIdentifier": "ACME-1"}, "made ACME-5 a sub-issue of ACME-1"},
		{clasp.ActionIssueParentChanged, "issue", issue, map[string]any{"identifier": "ACME-5", "parentId": nil, "previousParentId": "0191e0a4-0000-7000-8000-0000000000e3"}, "made ACME-5 a top-level issue"},
		{clasp.ActionIssueBlockersResolved, "issue", issue, map[string]any{"identifier": "ACME-5", "readyGeneration": 1}, "found every blocker of ACME-5 done: it may start"},
		{clasp.ActionIssueChildrenCompleted, "issue", issue, map[string]any{"identifier": "ACME-5", "childrenGeneration": 1}, "found every sub-issue of ACME-5 closed"},
		{clasp.ActionIssueEscalated, "issue", issue, map[string]any{"identifier": "ACME-5", "failures": 3, "previousCheckoutRunId": run}, "escalated ACME-5 to a person after 3 failed runs in a row, and blocked it; it was held by builder's run of 03:04:05"},
		{"issue.renamed_by_a_newer_server", "issue", issue, map[string]any{"x": 1}, "recorded issue renamed by a newer server on ACME-5"},
	}
	tail := regexp.MustCompile(`\b[0-9a-f]{8}\b`)
	for _, r := range rows {
		d, _ := json.Marshal(r.details)
		a := &clasp.Activity{Action: r.action, EntityType: r.entityType, EntityID: r.entityID, Details: d, ActorType: clasp.ActorSystem}
		var b strings.Builder
		for _, s := range l.describe(a) {
			b.WriteString(s.Text)
		}
		if got := b.String(); got != r.want {
			t.Errorf("%s: %q, want %q", r.action, got, r.want)
		} else if tail.MatchString(got) {
			t.Errorf("%s: %q shows an id", r.action, got)
		}
	}
	got := l.rows([]*clasp.Activity{{Action: "made.up", EntityType: "issue", EntityID: issue, Details: json.RawMessage(`{"a":1}`), ActorType: clasp.ActorSystem}})
	if len(got) != 1 || got[0].JSON != "{\n  \"a\": 1\n}" {
		t.Errorf("an unknown action's row keeps its raw JSON: %+v", got)
	}
}
