package httpapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/clasp-dev/clasp"
	"github.com/google/uuid"
)

// TestDependenciesOverHTTP: blockedByIssueIds and parentId are taken on
// create and PATCH (identifiers or UUIDs); every issue answer carries
// blockedBy, blocks, dependencyReady, unresolvedBlockerCount and
// unresolvedBlockerIssueIds, lists never null; a checkout of a blocked
// issue is 422 blocked_by_unresolved naming the blockers; a cycle is 422
// dependency_cycle; bad refs are 400 naming the field; inbox-lite,
// heartbeat-context (with ancestors) and ?ready=true carry readiness.
func TestDependenciesOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world("DP")
	top := b.issue(w.c.ID, map[string]any{"title": "top", "status": "todo"})
	b1 := b.issue(w.c.ID, map[string]any{"title": "b1", "status": "todo"})
	b2 := b.issue(w.c.ID, map[string]any{"title": "b2", "status": "done"})

	// Lists are [] and never null on an issue without edges.
	r := b.do("GET", "/api/issues/"+top.Identifier, req{})
	for _, field := range []string{`"blockedBy":[]`, `"blocks":[]`, `"unresolvedBlockerIssueIds":[]`, `"dependencyReady":true`, `"parentId":null`} {
		if !strings.Contains(string(r.body), field) {
			t.Errorf("GET of an issue without edges lacks %s: %s", field, r.body)
		}
	}

	var dep clasp.Issue
	b.must(http.StatusCreated, "POST", "/api/companies/"+w.c.ID+"/issues", req{body: map[string]any{
		"title": "dep", "status": "todo", "assigneeAgentId": w.a.ID, "parentId": top.Identifier,
		"blockedByIssueIds": []string{strings.ToLower(b1.Identifier), b2.ID, b1.ID}}}, &dep)
	if dep.DependencyReady || dep.UnresolvedBlockerCount != 1 || !slices.Equal(dep.UnresolvedBlockerIssueIDs, []string{b1.ID}) ||
		len(dep.BlockedBy) != 2 || deref(dep.ParentID) != top.ID {
		t.Errorf("created: ready %v count %d unresolved %v blockedBy %v parent %v", dep.DependencyReady, dep.UnresolvedBlockerCount,
			dep.UnresolvedBlockerIssueIDs, dep.BlockedBy, deref(dep.ParentID))
	}
	var got clasp.Issue
	b.must(http.StatusOK, "GET", "/api/issues/"+b1.ID, req{}, &got)
	if len(got.Blocks) != 1 || got.Blocks[0].Identifier != dep.Identifier || got.Blocks[0].Status != clasp.IssueTodo {
		t.Errorf("b1 blocks %v, want [%s todo]", got.Blocks, dep.Identifier)
	}

	// D1: the checkout is refused, naming the blocker, and nothing is written.
	e := wantErr(t, b.do("POST", "/api/issues/"+dep.Identifier+"/checkout", req{token: w.ka, run: w.ra1.ID,
		body: map[string]any{"agentId": w.a.ID, "expectedStatuses": []string{"todo"}}}), http.StatusUnprocessableEntity, clasp.CodeBlockedByUnresolved, "")
	if ids, _ := e.Details["unresolvedBlockerIssueIds"].([]any); len(ids) != 1 || ids[0] != b1.ID {
		t.Errorf("details.unresolvedBlockerIssueIds %v, want [%s]", e.Details["unresolvedBlockerIssueIds"], b1.ID)
	}
	if !strings.Contains(e.Error, b1.Identifier) {
		t.Errorf("the refusal does not name %s: %q", b1.Identifier, e.Error)
	}
	b.must(http.StatusOK, "GET", "/api/issues/"+dep.ID, req{}, &got)
	if got.Status != clasp.IssueTodo || got.CheckoutRunID != nil || got.CheckoutEpoch != 0 {
		t.Errorf("after a refused checkout: %s holder %v epoch %d", got.Status, got.CheckoutRunID, got.CheckoutEpoch)
	}
	// D2: done is refused too.
	wantErr(t, b.do("PATCH", "/api/issues/"+dep.ID, req{body: map[string]any{"status": "done"}}),
		http.StatusUnprocessableEntity, clasp.CodeBlockedByUnresolved, "")

	// Readiness in inbox-lite, heartbeat-context (with ancestors) and the ready list.
	r = b.do("GET", "/api/agents/me/inbox-lite", req{token: w.ka})
	var inbox []map[string]any
	if err := json.Unmarshal(r.body, &inbox); err != nil || len(inbox) != 1 || inbox[0]["dependencyReady"] != false ||
		inbox[0]["unresolvedBlockerCount"] != float64(1) || inbox[0]["parentId"] != top.ID {
		t.Errorf("inbox-lite: %s", r.body)
	}
	var hb struct {
		Issue     clasp.Issue          `json:"issue"`
		Ancestors []clasp.IssueSummary `json:"ancestors"`
		Allowed   struct {
			Checkout bool   `json:"checkout"`
			Reason   string `json:"reason"`
		} `json:"allowedActions"`
	}
	b.must(http.StatusOK, "GET", "/api/issues/"+dep.ID+"/heartbeat-context", req{token: w.ka, run: w.ra1.ID}, &hb)
	if len(hb.Ancestors) != 1 || hb.Ancestors[0].ID != top.ID || len(hb.Issue.BlockedBy) != 2 || hb.Allowed.Checkout ||
		hb.Allowed.Reason != "blocked_by_unresolved" {
		t.Errorf("heartbeat-context: ancestors %v blockedBy %v allowed %+v", hb.Ancestors, hb.Issue.BlockedBy, hb.Allowed)
	}
	var ready []clasp.Issue
	b.must(http.StatusOK, "GET", "/api/companies/"+w.c.ID+"/issues?ready=true", req{}, &ready)
	for _, x := range ready {
		if x.ID == dep.ID {
			t.Errorf("?ready=true lists %s, which waits on %s", dep.Identifier, b1.Identifier)
		}
	}
	var children []clasp.Issue
	b.must(http.StatusOK, "GET", "/api/companies/"+w.c.ID+"/issues?parentId="+top.ID, req{}, &children)
	if len(children) != 1 || children[0].ID != dep.ID {
		t.Errorf("?parentId lists %d issues, want %s", len(children), dep.Identifier)
	}

	// An issue with a parent and no edge still gets its ancestors (the
	// relations read is skipped only for a top-level issue without edges).
	leaf := b.issue(w.c.ID, map[string]any{"title": "leaf", "status": "todo", "assigneeAgentId": w.a.ID, "parentId": top.ID})
	b.must(http.StatusOK, "GET", "/api/issues/"+leaf.ID+"/heartbeat-context", req{token: w.ka, run: w.ra1.ID}, &hb)
	if len(hb.Ancestors) != 1 || hb.Ancestors[0].ID != top.ID || len(hb.Issue.BlockedBy) != 0 || len(hb.Issue.Blocks) != 0 {
		t.Errorf("heartbeat-context of a child without edges: ancestors %v blockedBy %v blocks %v", hb.Ancestors, hb.Issue.BlockedBy, hb.Issue.Blocks)
	}

	// D3: a cycle is refused, naming it.
	e = wantErr(t, b.do("PATCH", "/api/issues/"+b1.ID, req{body: map[string]any{"blockedByIssueIds": []string{dep.Identifier}}}),
		http.StatusUnprocessableEntity, clasp.CodeDependencyCycle, "blockedByIssueIds")
	if !strings.Contains(e.Error, dep.Identifier) || !strings.Contains(e.Error, b1.Identifier) {
		t.Errorf("the cycle's message does not name both issues: %q", e.Error)
	}
	wantErr(t, b.do("PATCH", "/api/issues/"+top.ID, req{body: map[string]any{"parentId": dep.Identifier}}),
		http.StatusUnprocessableEntity, clasp.CodeDependencyCycle, "parentId")

	// Bad input: the field is named; nothing changes.
	wantErr(t, b.do("PATCH", "/api/issues/"+dep.ID, req{body: map[string]any{"blockedByIssueIds": []string{"not a ref"}}}),
		http.StatusBadRequest, clasp.CodeInvalidRequest, "blockedByIssueIds")
	wantErr(t, b.do("PATCH", "/api/issues/"+dep.ID, req{body: map[string]any{"blockedByIssueIds": "DP-1"}}),
		http.StatusBadRequest, clasp.CodeInvalidRequest, "blockedByIssueIds")
	wantErr(t, b.do("PATCH", "/api/issues/"+dep.ID, req{body: map[string]any{"parentId": 7}}),
		http.StatusBadRequest, clasp.CodeInvalidRequest, "parentId")
	many := make([]string, maxBlockers+1)
	for i := range many {
		many[i] = uuid.NewString() // validation refuses the list before any is looked up
	}
	wantErr(t, b.do("POST", "/api/companies/"+w.c.ID+"/issues", req{body: map[string]any{"title": "x", "blockedByIssueIds": many}}),
		http.StatusBadRequest, clasp.CodeInvalidRequest, "blockedByIssueIds")
	e = wantErr(t, b.do("PATCH", "/api/issues/"+dep.ID, req{body: map[string]any{"blockedByIssueIds": []any{b1.Identifier, nil}}}),
		http.StatusBadRequest, clasp.CodeInvalidRequest, "blockedByIssueIds")
	if !strings.Contains(e.Error, "null") {
		t.Errorf("a null blocker's message does not say null: %q", e.Error)
	}
	// A repeated blocker counts once, as the one edge it makes.
	for i := range many {
		many[i] = b1.Identifier
	}
	var repeated clasp.Issue
	b.must(http.StatusCreated, "POST", "/api/companies/"+w.c.ID+"/issues", req{body: map[string]any{"title": "x", "blockedByIssueIds": many}}, &repeated)
	if len(repeated.BlockedBy) != 1 {
		t.Errorf("an issue blocked %d times by one issue has blockers %v, want that one", len(many), repeated.BlockedBy)
	}
	b.must(http.StatusOK, "PATCH", "/api/issues/"+repeated.ID, req{body: map[string]any{"blockedByIssueIds": nil}}, &repeated)
	other := b.world("OT")
	theirs := b.issue(other.c.ID, map[string]any{"title": "theirs"})
	r = b.do("PATCH", "/api/issues/"+dep.ID, req{body: map[string]any{"blockedByIssueIds": []string{theirs.ID}}})
	if r.status != http.StatusNotFound && r.status != http.StatusUnprocessableEntity {
		t.Errorf("a blocker of another company: %d %s, want 404 or 422", r.status, r.body)
	}
	wantErr(t, b.do("PATCH", "/api/issues/"+dep.ID, req{body: map[string]any{"blockedByIssueIds": []string{dep.Identifier}}}),
		http.StatusUnprocessableEntity, clasp.CodePreconditionFailed, "blockedByIssueIds")
	b.must(http.StatusOK, "GET", "/api/issues/"+dep.ID, req{}, &got)
	if len(got.BlockedBy) != 2 {
		t.Errorf("refused PATCHes changed the blockers: %v", got.BlockedBy)
	}

	// Removing the last unresolved blocker and finishing in one PATCH works.
	b.must(http.StatusOK, "PATCH", "/api/issues/"+dep.ID, req{body: map[string]any{"blockedByIssueIds": []string{b2.Identifier}, "status": "done"}}, &got)
	if got.Status != clasp.IssueDone || !got.DependencyReady || len(got.BlockedBy) != 1 {
		t.Errorf("after the PATCH: %s ready %v blockedBy %v", got.Status, got.DependencyReady, got.BlockedBy)
	}
	if n := countAction(b.activity(dep.ID), clasp.ActionIssueBlockerRemoved); n != 1 {
		t.Errorf("issue.blocker_removed rows: %d, want 1", n)
	}
	// A create that would start done while blocked is refused naming the
	// blocker, never the identifier the rolled-back issue would have had.
	var open clasp.Issue
	b.must(http.StatusCreated, "POST", "/api/companies/"+w.c.ID+"/issues", req{body: map[string]any{"title": "open", "status": "todo"}}, &open)
	e = wantErr(t, b.do("POST", "/api/companies/"+w.c.ID+"/issues", req{body: map[string]any{
		"title": "born done", "status": "done", "blockedByIssueIds": []string{open.Identifier}}}), http.StatusUnprocessableEntity, clasp.CodeBlockedByUnresolved, "status")
	var next clasp.Issue
	b.must(http.StatusCreated, "POST", "/api/companies/"+w.c.ID+"/issues", req{body: map[string]any{"title": "next", "status": "todo"}}, &next)
	if !strings.Contains(e.Error, open.Identifier) || strings.Contains(e.Error, next.Identifier) {
		t.Errorf("refused create names %q; want %s and not %s (the identifier given next)", e.Error, open.Identifier, next.Identifier)
	}
	// The blocker whose edge was removed blocks nothing any more, and the
	// other blocker still lists dep.
	b.must(http.StatusOK, "GET", "/api/issues/"+b1.ID, req{}, &got)
	if len(got.Blocks) != 0 {
		t.Errorf("b1 blocks %v after its edge was removed, want []", got.Blocks)
	}
	b.must(http.StatusOK, "GET", "/api/issues/"+b2.ID, req{}, &got)
	if len(got.Blocks) != 1 || got.Blocks[0].ID != dep.ID {
		t.Errorf("b2 blocks %v, want [%s]", got.Blocks, dep.Identifier)
	}
}

// nudgeCounter counts the API's nudges of the dependency-wake pass.
type nudgeCounter struct{ n atomic.Int64 }

func (c *nudgeCounter) Nudge() { c.n.Add(1) }

// TestDependencyNudges: a PATCH nudges the dependency-wake pass (D8) when
// it may have made a wake due (it set blockers or a parent, or set the
// status of an issue with an edge or a parent) and not otherwise, so that
// a stream of status changes of unrelated issues does not run a pass
// after each write.
func TestDependencyNudges(t *testing.T) {
	t.Parallel()
	var nudges nudgeCounter
	b := setup(t, func(o *setupOpts) { o.dependencies = &nudges })
	w := b.world("DN")
	lone := b.issue(w.c.ID, map[string]any{"title": "lone", "status": "todo"})
	blocker := b.issue(w.c.ID, map[string]any{"title": "blocker", "status": "todo"})
	b.issue(w.c.ID, map[string]any{"title": "dependent", "status": "todo", "blockedByIssueIds": []string{blocker.ID}})
	parent := b.issue(w.c.ID, map[string]any{"title": "parent", "status": "todo"})
	child := b.issue(w.c.ID, map[string]any{"title": "child", "status": "todo", "parentId": parent.ID})
	other := b.issue(w.c.ID, map[string]any{"title": "other", "status": "todo"})

	for _, c := range []struct {
		name string
		ref  string
		body map[string]any
		want int64
	}{
		{"status of an issue with no edge and no parent", lone.ID, map[string]any{"status": "done"}, 0},
		{"title only", blocker.ID, map[string]any{"title": "renamed"}, 0},
		{"status of a blocker", blocker.ID, map[string]any{"status": "done"}, 1},
		{"status of a child", child.ID, map[string]any{"status": "cancelled"}, 1},
		{"blockers set", other.ID, map[string]any{"blockedByIssueIds": []string{lone.ID}}, 1},
		{"blockers cleared", other.ID, map[string]any{"blockedByIssueIds": []string{}}, 1},
		{"parent set", other.ID, map[string]any{"parentId": parent.ID}, 1},
	} {
		before := nudges.n.Load()
		b.must(http.StatusOK, "PATCH", "/api/issues/"+c.ref, req{body: c.body}, nil)
		if got := nudges.n.Load() - before; got != c.want {
			t.Errorf("%s: %d nudges, want %d", c.name, got, c.want)
		}
	}
}
