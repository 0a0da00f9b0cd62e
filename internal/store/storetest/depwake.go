package storetest

// The dependency wakes (RULES.md, D8) on a HeartbeatStore: one wake per
// ready state, whoever delivers it and however often.

import (
	"testing"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// depWakeTests are run by RunHeartbeat.
var depWakeTests = []struct {
	name string
	fn   func(*testing.T, *hbEnv)
}{
	{"D8_BlockersResolvedWakeOnce", testD8BlockersResolvedWake},
	{"D8_ChildrenCompletedWake", testD8ChildrenCompletedWake},
	{"D8_Race_TwoBlockersTwoDeliverers", testD8RaceTwoBlockers},
	{"D8_ClosedBeforeDelivery", testD8ClosedBeforeDelivery},
}

// D8: an issue closed between its ready state and the delivery (its agent
// took it at once) still gets its one wake request, recorded skipped, with
// no run queued; a later delivery sends nothing more.
func testD8ClosedBeforeDelivery(t *testing.T, e *hbEnv) {
	t.Cleanup(func() { checkDepCounts(t, e.st, e.co.ID) })
	b := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	i := depIssue(t, e.env, clasp.IssueTodo, e.a.ID, "", b.ID)
	mustStatus(t, e.st, b.ID, clasp.IssueDone)
	mustStatus(t, e.st, i.ID, clasp.IssueDone)
	e.deliver(t, "closed before delivery", 1)
	e.deliver(t, "again", 0)
	w := e.wakesOf(t, e.a.ID, clasp.InvocationBlockersResolved)
	if len(w) != 1 {
		t.Fatalf("wake requests: %d, want 1", len(w))
	}
	if d := details(t, w[0]); asString(d["outcome"]) != store.WakeSkipped || asString(d["issueId"]) != i.ID {
		t.Errorf("wake details %v, want outcome %s for issue %s", d, store.WakeSkipped, i.ID)
	}
	if runs, err := e.hs.RunQueuedManaged(t.Context(), 10); err != nil || len(runs) != 0 {
		t.Errorf("queued runs: %v, %v; want none for a closed issue", runs, err)
	}
}

// wakesOf returns agentID's agent.wake_requested rows with reason.
func (e *hbEnv) wakesOf(t *testing.T, agentID, reason string) []*clasp.Activity {
	t.Helper()
	var out []*clasp.Activity
	for _, a := range allActivity(t, e.st, store.ActivityListParams{CompanyID: e.co.ID, EntityID: agentID, Action: clasp.ActionWakeRequested}) {
		if asString(details(t, a)["reason"]) == reason {
			out = append(out, a)
		}
	}
	return out
}

// deliver runs DependencyWakesDeliver and checks how many it sent.
func (e *hbEnv) deliver(t *testing.T, what string, want int) {
	t.Helper()
	n, err := e.hs.DependencyWakesDeliver(t.Context(), 100)
	if err != nil || n != want {
		t.Errorf("%s: delivered %d, %v; want %d", what, n, err, want)
	}
}

// D8: the last blocker done wakes the assignee once (issue_blockers_resolved,
// issue.blockers_resolved); again delivering sends nothing; blocked again
// and ready again sends one more.
func testD8BlockersResolvedWake(t *testing.T, e *hbEnv) {
	t.Cleanup(func() { checkDepCounts(t, e.st, e.co.ID) })
	b1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	b2 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	i1 := depIssue(t, e.env, clasp.IssueTodo, e.a.ID, "", b1.ID, b2.ID)
	free := depIssue(t, e.env, clasp.IssueTodo, "", "", b1.ID) // no assignee: marked, no wake request
	e.deliver(t, "blocked", 0)
	mustStatus(t, e.st, b1.ID, clasp.IssueDone)
	e.deliver(t, "one blocker left", 0) // free's state: marked, activity only, no wake
	mustStatus(t, e.st, b2.ID, clasp.IssueDone)
	e.deliver(t, "ready", 1)
	e.deliver(t, "again", 0)
	if w := e.wakesOf(t, e.a.ID, clasp.InvocationBlockersResolved); len(w) != 1 {
		t.Fatalf("wake requests: %d, want 1", len(w))
	} else if got := asString(details(t, w[0])["issueId"]); got != i1.ID {
		t.Errorf("wake issueId %s, want %s", got, i1.ID)
	}
	if n := len(e.issueActivity(t, i1.ID, clasp.ActionIssueBlockersResolved)); n != 1 {
		t.Errorf("issue.blockers_resolved rows: %d, want 1", n)
	}
	if n := len(e.issueActivity(t, free.ID, clasp.ActionIssueBlockersResolved)); n != 1 {
		t.Errorf("issue.blockers_resolved rows of the unassigned issue: %d, want 1", n)
	}
	// the queued run carries the reason
	runs, err := e.hs.RunQueuedManaged(t.Context(), 10)
	if err != nil || len(runs) != 1 || runs[0].Run.InvocationSource != clasp.InvocationBlockersResolved {
		t.Errorf("queued runs: %v, %v; want one with invocation source %s", runs, err, clasp.InvocationBlockersResolved)
	}
	mustStatus(t, e.st, b2.ID, clasp.IssueTodo)
	e.deliver(t, "blocked again", 0)
	mustStatus(t, e.st, b2.ID, clasp.IssueDone)
	e.deliver(t, "ready again", 1)
	if w := e.wakesOf(t, e.a.ID, clasp.InvocationBlockersResolved); len(w) != 2 {
		t.Errorf("wake requests after ready again: %d, want 2", len(w))
	}
}

// D8: every child closed wakes the parent's assignee once
// (issue_children_completed); a blocked parent is marked without a wake.
func testD8ChildrenCompletedWake(t *testing.T, e *hbEnv) {
	t.Cleanup(func() { checkDepCounts(t, e.st, e.co.ID) })
	p := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, e.b.ID)
	c1 := depIssue(t, e.env, clasp.IssueTodo, "", p.ID)
	c2 := depIssue(t, e.env, clasp.IssueTodo, "", p.ID)
	mustStatus(t, e.st, c1.ID, clasp.IssueDone)
	e.deliver(t, "one child open", 0)
	mustStatus(t, e.st, c2.ID, clasp.IssueCancelled)
	e.deliver(t, "children closed", 1)
	e.deliver(t, "again", 0)
	if w := e.wakesOf(t, e.b.ID, clasp.InvocationChildrenComplete); len(w) != 1 {
		t.Errorf("children wakes: %d, want 1", len(w))
	}
	mustStatus(t, e.st, c2.ID, clasp.IssueTodo)
	mustStatus(t, e.st, p.ID, clasp.IssueBlocked)
	mustStatus(t, e.st, c2.ID, clasp.IssueDone)
	e.deliver(t, "blocked parent", 0)
	mustStatus(t, e.st, p.ID, clasp.IssueTodo)
	e.deliver(t, "parent unblocked", 0) // that state was marked woken
	if w := e.wakesOf(t, e.b.ID, clasp.InvocationChildrenComplete); len(w) != 1 {
		t.Errorf("children wakes after the blocked parent: %d, want 1", len(w))
	}
}

// D8 race: two blockers finishing at once, and two deliverers at once:
// exactly one wake request for the dependent, each round.
func testD8RaceTwoBlockers(t *testing.T, e *hbEnv) {
	t.Cleanup(func() { checkDepCounts(t, e.st, e.co.ID) })
	ctx := t.Context()
	rounds := scale(100, 20)
	for k := range rounds {
		b1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
		b2 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
		i1 := depIssue(t, e.env, clasp.IssueTodo, e.a.ID, "", b1.ID, b2.ID)
		race(2, func(g int) {
			if _, err := setStatus(ctx, e.st, []string{b1.ID, b2.ID}[g], clasp.IssueDone); err != nil {
				t.Errorf("round %d: finish blocker: %v", k, err)
			}
		})
		var sent [2]int
		race(2, func(g int) {
			n, err := e.hs.DependencyWakesDeliver(ctx, 100)
			if err != nil {
				t.Errorf("round %d: deliver: %v", k, err)
			}
			sent[g] = n
		})
		if sent[0]+sent[1] != 1 {
			t.Errorf("round %d: the deliverers sent %v, want 1 in all", k, sent)
		}
		n := 0
		for _, w := range e.wakesOf(t, e.a.ID, clasp.InvocationBlockersResolved) {
			if asString(details(t, w)["issueId"]) == i1.ID {
				n++
			}
		}
		if n != 1 {
			t.Errorf("round %d: %d wake requests for %s, want 1", k, n, i1.Identifier)
		}
	}
	t.Logf("two blockers, two deliverers, %d rounds: one wake each", rounds)
}
