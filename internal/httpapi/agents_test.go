package httpapi

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/clasp-dev/clasp"
)

// Agents: status (paused, terminated) and adapters.

// TestPausedAgentTakesNoNewWork: a paused agent may not open runs, check
// out or claim: 422 precondition_failed naming its status
// (details.agentStatus), and nothing is written; what it holds it can
// still release; resumed, it works again.
func TestPausedAgentTakesNoNewWork(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, b *bundle) {
		w := b.world("PA")
		held := b.issue(w.c.ID, map[string]any{"title": "held", "status": "todo"})
		free := b.issue(w.c.ID, map[string]any{"title": "free", "status": "todo"})
		if r := b.checkout(held.ID, w.ka, w.ra1.ID, w.a.ID, clasp.IssueTodo); r.status != http.StatusOK {
			t.Fatalf("checkout before the pause: %d", r.status)
		}
		b.must(http.StatusOK, "PATCH", "/api/agents/"+w.a.ID, req{body: map[string]any{"status": "paused"}}, nil)

		e := wantErr(t, b.do("POST", "/api/agents/me/runs", req{token: w.ka, body: map[string]any{}}), http.StatusUnprocessableEntity, clasp.CodePreconditionFailed, "")
		if e.Details["agentStatus"] != "paused" {
			t.Errorf("open run details %v, want agentStatus paused", e.Details)
		}
		wantErr(t, b.checkout(free.ID, w.ka, w.ra1.ID, w.a.ID, clasp.IssueTodo), http.StatusUnprocessableEntity, clasp.CodePreconditionFailed, "")
		wantErr(t, b.do("POST", "/api/agents/me/claim", req{token: w.ra2.RunToken, body: map[string]any{"scope": "any"}}),
			http.StatusUnprocessableEntity, clasp.CodePreconditionFailed, "")
		if got := b.getIssue(free.ID); got.CheckoutRunID != nil || got.Status != clasp.IssueTodo {
			t.Errorf("refused checkout changed the issue: %+v", got)
		}
		b.must(http.StatusOK, "POST", "/api/issues/"+held.ID+"/release", req{token: w.ka, run: w.ra1.ID, body: map[string]any{}}, nil)

		b.must(http.StatusOK, "PATCH", "/api/agents/"+w.a.ID, req{body: map[string]any{"status": "active"}}, nil)
		if r := b.checkout(free.ID, w.ka, w.ra1.ID, w.a.ID, clasp.IssueTodo); r.status != http.StatusOK {
			t.Errorf("checkout after resume: %d %s", r.status, r.body)
		}
	})
}

// TestTerminateAgentEndsRunsAndLocks: PATCH status terminated cancels the
// agent's runs (errorCode agent_terminated) and frees their issues in the
// same transaction (one issue.lock_released each); its run tokens stop
// working, and terminated is final (active or paused again is 422
// precondition_failed). Another agent's run is untouched.
func TestTerminateAgentEndsRunsAndLocks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world("TM")
	i1 := b.issue(w.c.ID, map[string]any{"status": "todo"})
	if res := b.checkout(i1.ID, w.ra1.RunToken, "", w.a.ID); res.status != http.StatusOK {
		t.Fatalf("checkout: %d %s", res.status, res.body)
	}
	b.must(http.StatusOK, "PATCH", "/api/agents/"+w.a.ID, req{body: map[string]any{"status": "terminated"}}, nil)
	for _, r := range []*clasp.Run{w.ra1, w.ra2} {
		var got clasp.Run
		b.must(http.StatusOK, "GET", "/api/runs/"+r.ID, req{}, &got)
		if got.Status != clasp.RunCancelled || got.ErrorCode == nil || *got.ErrorCode != clasp.RunErrorAgentTerminated {
			t.Errorf("run %s of the terminated agent: got %s (errorCode %v), want cancelled, agent_terminated", r.ID, got.Status, got.ErrorCode)
		}
	}
	if iss := b.getIssue(i1.ID); iss.CheckoutRunID != nil || iss.ExecutionRunID != nil {
		t.Errorf("issue of the terminated agent's run: locks %v/%v, want none", iss.CheckoutRunID, iss.ExecutionRunID)
	}
	if n := countAction(b.activity(i1.ID), clasp.ActionIssueLockReleased); n != 1 {
		t.Errorf("issue.lock_released rows: got %d, want 1", n)
	}
	for _, st := range []string{"active", "paused"} {
		wantErr(t, b.do("PATCH", "/api/agents/"+w.a.ID, req{body: map[string]any{"status": st}}), 422, clasp.CodePreconditionFailed, "status")
	}
	wantErr(t, b.do("GET", "/api/agents/me", req{token: w.ra1.RunToken}), 401, clasp.CodeUnauthenticated, "")
	var rb clasp.Run
	b.must(http.StatusOK, "GET", "/api/runs/"+w.rb.ID, req{}, &rb)
	if rb.Status != clasp.RunRunning {
		t.Errorf("B's run: got %s, want running", rb.Status)
	}
}

// TestTerminatedAgentsIssuesGoToOthers: terminating an agent hands back,
// in the same transaction, the open issues it was assigned: the one its
// run held becomes todo with no assignee and no lock (issue.updated with
// cause agent_terminated), the one waiting for it loses its assignee, a
// done one keeps it. Another agent then checks out the first and claims
// the second, with no board write in between.
func TestTerminatedAgentsIssuesGoToOthers(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, b *bundle) {
		w := b.world("TG")
		heldIss := b.issue(w.c.ID, map[string]any{"title": "held", "status": "todo"})
		waiting := b.issue(w.c.ID, map[string]any{"title": "waiting", "status": "todo", "assigneeAgentId": w.a.ID})
		done := b.issue(w.c.ID, map[string]any{"title": "done", "status": "done", "assigneeAgentId": w.a.ID})
		if r := b.checkout(heldIss.ID, w.ra1.RunToken, "", w.a.ID); r.status != http.StatusOK {
			t.Fatalf("checkout by A: %d %s", r.status, r.body)
		}
		b.must(http.StatusOK, "PATCH", "/api/agents/"+w.a.ID, req{body: map[string]any{"status": "terminated"}}, nil)

		for _, c := range []struct {
			iss    *clasp.Issue
			status clasp.IssueStatus
		}{{heldIss, clasp.IssueTodo}, {waiting, clasp.IssueTodo}} {
			got := b.getIssue(c.iss.ID)
			if got.Status != c.status || got.AssigneeAgentID != nil || got.CheckoutRunID != nil || got.ExecutionRunID != nil {
				t.Errorf("%s after terminating its assignee: status %s, assignee %q, locks %q/%q; want %s, no assignee, no lock",
					c.iss.Title, got.Status, deref(got.AssigneeAgentID), deref(got.CheckoutRunID), deref(got.ExecutionRunID), c.status)
			}
			n := 0
			for _, a := range b.activity(c.iss.ID) {
				var d struct{ Cause string }
				if a.Action == clasp.ActionIssueUpdated && json.Unmarshal(a.Details, &d) == nil && d.Cause == "agent_terminated" {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%s: issue.updated rows with cause agent_terminated: got %d, want 1", c.iss.Title, n)
			}
		}
		if got := b.getIssue(done.ID); got.AssigneeAgentID == nil || *got.AssigneeAgentID != w.a.ID {
			t.Errorf("done issue: assignee %q, want %s kept", deref(got.AssigneeAgentID), w.a.ID)
		}

		if r := b.checkout(heldIss.ID, w.rb.RunToken, "", w.b.ID); r.status != http.StatusOK {
			t.Errorf("B's checkout of the issue A held: %d %s, want 200", r.status, r.body)
		}
		var claimed clasp.Issue
		b.must(http.StatusOK, "POST", "/api/agents/me/claim", req{token: w.rb.RunToken, body: map[string]any{"scope": "unassigned"}}, &claimed)
		if claimed.ID != waiting.ID {
			t.Errorf("B's claim: got %s (%s), want %s", claimed.Identifier, claimed.Title, waiting.Identifier)
		}
	})
}

// TestRelativeAdapterCommandIsRefused: a process adapter's command must be
// an absolute path (a relative one could never be spawned by the
// scheduler): 400 naming adapter.command.
func TestRelativeAdapterCommandIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	co := b.company("RC")
	ag, _ := b.agent(co.ID, "alpha")
	for _, cmd := range []string{"relative/path", "sh"} {
		wantErr(t, b.do("PATCH", "/api/agents/"+ag.ID, req{body: map[string]any{"adapter": map[string]any{"type": "process", "command": cmd}}}),
			http.StatusBadRequest, clasp.CodeInvalidRequest, "adapter.command")
	}
}
