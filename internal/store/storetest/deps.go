package storetest

// The contract of issue dependencies (RULES.md, Dependencies, D1-D10):
// blockers, parents, readiness, cycles, the relations read, the claim,
// and, on a HeartbeatStore, the dependency wakes. After every test the
// maintained counts are compared with counts recomputed from the edges
// (D10, checkDepCounts).

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// depTests are the dependency contract tests run by Run.
var depTests = []struct {
	name string
	fn   func(*testing.T, opener)
}{
	{"D1_CheckoutBlockedByUnresolved", testD1CheckoutBlocked},
	{"D2_DoneBlockedByUnresolved", testD2DoneBlocked},
	{"D3_BlockerCycle", testD3BlockerCycle},
	{"D3_ParentCycle", testD3ParentCycle},
	{"D3_DeepChain", testD3DeepChain},
	{"D4_EdgeRefs", testD4EdgeRefs},
	{"D5_EdgeChangesAndActivity", testD5EdgeChanges},
	{"D6_ReopenedBlocker", testD6ReopenedBlocker},
	{"D7_ClaimSkipsBlocked", testD7ClaimSkipsBlocked},
	{"D9_RelationsInboxList", testD9Relations},
	{"D10_TerminateAndReleaseKeepCounts", testD10StatusPathsKeepCounts},
	{"D1_Race_CheckoutVsReopen", testD1RaceCheckoutVsReopen},
	{"D3_Race_CycleHalves", testD3RaceCycleHalves},
	{"D10_Property_RandomOps", testD10PropertyRandomOps},
	{"D7_Race_ClaimVsReopen", testD7RaceClaimVsReopen},
}

// depCounter is a store that can recompute the dependency counts
// (store.CRUD.DepCountsMismatch, both stores).
type depCounter interface {
	DepCountsMismatch(ctx context.Context, companyID string) ([]string, error)
}

// newDepEnv is newEnv whose counts are checked (D10) when the test ends.
func newDepEnv(t *testing.T, open opener) *env {
	t.Helper()
	e := newEnv(t, open)
	t.Cleanup(func() { checkDepCounts(t, e.st, e.co.ID) })
	return e
}

// checkDepCounts fails t when a maintained count of an issue of companyID
// differs from the one recomputed from the edges and the children (D10).
func checkDepCounts(t *testing.T, st store.Store, companyID string) {
	t.Helper()
	dc, ok := st.(depCounter)
	if !ok {
		t.Fatalf("store %T cannot recompute dependency counts", st)
	}
	bad, err := dc.DepCountsMismatch(context.Background(), companyID)
	if err != nil {
		t.Fatalf("check dependency counts: %v", err)
	}
	for _, b := range bad {
		t.Errorf("D10 counts: %s", b)
	}
}

// depIssue creates an issue of e's company (board) with blockers and a
// parent (refs).
func depIssue(t *testing.T, e *env, status clasp.IssueStatus, assignee, parent string, blockers ...string) *clasp.Issue {
	t.Helper()
	iss, err := e.st.IssueCreate(t.Context(), &store.IssueCreateParams{CompanyID: e.co.ID, Title: "dep " + fmt.Sprint(rand.Int()), // #nosec G404 -- a title, not a secret
		Status: status, AssigneeAgentID: assignee, ParentID: parent, BlockedByIssueIDs: blockers, Actor: boardActor()})
	if err != nil {
		t.Fatalf("setup: create issue blocked by %v (parent %q): %v", blockers, parent, err)
	}
	return iss
}

// setStatus PATCHes ref's status as the board.
func setStatus(ctx context.Context, st store.Store, ref string, s clasp.IssueStatus) (*clasp.Issue, error) {
	return st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: ref, Status: &s, Actor: boardActor()})
}

// mustStatus is setStatus that fails the test on an error.
func mustStatus(t *testing.T, st store.Store, ref string, s clasp.IssueStatus) *clasp.Issue {
	t.Helper()
	iss, err := setStatus(t.Context(), st, ref, s)
	if err != nil {
		t.Fatalf("set issue %s %s: %v", ref, s, err)
	}
	return iss
}

// setBlockers PATCHes ref's full blocker list as the board.
func setBlockers(ctx context.Context, st store.Store, ref string, blockers ...string) (*clasp.Issue, error) {
	if blockers == nil {
		blockers = []string{}
	}
	return st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: ref, BlockedByIssueIDs: &blockers, Actor: boardActor()})
}

// wantBlocked checks that err is 422 blocked_by_unresolved naming the
// blockers (ids in details, identifiers in the message).
func wantBlocked(t *testing.T, what string, err error, blockers ...*clasp.Issue) {
	t.Helper()
	e := clasp.AsError(err)
	if e == nil || e.Code != clasp.CodeBlockedByUnresolved {
		t.Errorf("%s: got %v, want 422 blocked_by_unresolved", what, err)
		return
	}
	var want []string
	for _, b := range blockers {
		want = append(want, b.ID)
		if !strings.Contains(e.Message, b.Identifier) {
			t.Errorf("%s: message %q does not name blocker %s", what, e.Message, b.Identifier)
		}
	}
	got, _ := e.Details["unresolvedBlockerIssueIds"].([]string)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s: details.unresolvedBlockerIssueIds %v, want %v", what, e.Details["unresolvedBlockerIssueIds"], want)
	}
}

// wantReady checks an issue's readiness columns.
func wantReady(t *testing.T, what string, iss *clasp.Issue, count int) {
	t.Helper()
	if iss.UnresolvedBlockerCount != count || iss.DependencyReady != (count == 0) {
		t.Errorf("%s: unresolvedBlockerCount %d, dependencyReady %v; want %d, %v", what, iss.UnresolvedBlockerCount,
			iss.DependencyReady, count, count == 0)
	}
}

// D1: entering in_progress (agent checkout, board checkout, board PATCH)
// with a blocker not done is 422 blocked_by_unresolved naming it; once
// every blocker is done the checkout succeeds.
func testD1CheckoutBlocked(t *testing.T, open opener) {
	e := newDepEnv(t, open)
	ctx := t.Context()
	b1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	b2 := newIssue(t, e.st, e.co.ID, clasp.IssueDone, "")
	i1 := depIssue(t, e, clasp.IssueTodo, "", "", b1.Identifier, b2.ID)
	wantReady(t, "created", i1, 1)
	r1 := openRun(t, e.st, e.a)

	_, err := checkout(ctx, e.st, r1, i1.ID, clasp.IssueTodo)
	wantBlocked(t, "agent checkout", err, b1)
	_, err = e.st.IssueCheckout(ctx, &store.IssueCheckoutParams{Ref: i1.ID, AgentID: e.a.ID,
		ExpectedStatuses: []clasp.IssueStatus{clasp.IssueTodo}, Actor: boardActor()})
	wantBlocked(t, "board checkout", err, b1)
	_, err = e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: i1.ID, Status: ptr(clasp.IssueInProgress),
		AssigneeAgentID: ptr(e.a.ID), Actor: boardActor()})
	wantBlocked(t, "board PATCH in_progress", err, b1)
	if got := getIssue(t, e.st, i1.ID); got.Status != clasp.IssueTodo || got.CheckoutRunID != nil {
		t.Errorf("after refusals: status %s, checkout %v; want todo, unlocked", got.Status, deref(got.CheckoutRunID))
	}
	// a conflict reason comes before D1
	r2 := openRun(t, e.st, e.b)
	_, err = checkout(ctx, e.st, r2, i1.ID, clasp.IssueBacklog)
	wantCode(t, "checkout with an unexpected status", err, clasp.CodeCheckoutConflict)

	mustStatus(t, e.st, b1.ID, clasp.IssueDone)
	got := mustCheckout(t, e.st, r1, i1.ID, clasp.IssueTodo)
	wantReady(t, "checked out", got, 0)
}

// D2: moving to done with a blocker not done is refused (PATCH, and a
// creation done or in_progress); removing the last blocker and finishing
// in one PATCH succeeds; a cancelled blocker stays unresolved.
func testD2DoneBlocked(t *testing.T, open opener) {
	e := newDepEnv(t, open)
	ctx := t.Context()
	b1 := newIssue(t, e.st, e.co.ID, clasp.IssueCancelled, "")
	i1 := depIssue(t, e, clasp.IssueTodo, "", "", b1.ID)
	wantReady(t, "blocked by a cancelled issue", i1, 1)
	_, err := setStatus(ctx, e.st, i1.ID, clasp.IssueDone)
	wantBlocked(t, "PATCH done", err, b1)
	for _, st := range []clasp.IssueStatus{clasp.IssueDone, clasp.IssueInProgress} {
		before := len(allActivity(t, e.st, store.ActivityListParams{CompanyID: e.co.ID}))
		_, err = e.st.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: e.co.ID, Title: "born " + string(st), Status: st,
			AssigneeAgentID: e.a.ID, BlockedByIssueIDs: []string{b1.ID}, Actor: boardActor()})
		wantBlocked(t, "create "+string(st), err, b1)
		if after := len(allActivity(t, e.st, store.ActivityListParams{CompanyID: e.co.ID})); after != before {
			t.Errorf("create %s refused: %d activity rows written, want none", st, after-before)
		}
	}
	got, err := e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: i1.ID, Status: ptr(clasp.IssueDone),
		BlockedByIssueIDs: &[]string{}, Actor: boardActor()})
	if err != nil {
		t.Fatalf("PATCH without blockers and done: %v", err)
	}
	if got.Status != clasp.IssueDone {
		t.Errorf("PATCH without blockers and done: status %s", got.Status)
	}
	wantReady(t, "done", got, 0)
}

// D3: an edge that closes a cycle of blockers is 422 dependency_cycle
// naming the cycle's identifiers, from the issue back to it.
func testD3BlockerCycle(t *testing.T, open opener) {
	e := newDepEnv(t, open)
	ctx := t.Context()
	c := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	b := depIssue(t, e, clasp.IssueTodo, "", "", c.ID)
	a := depIssue(t, e, clasp.IssueTodo, "", "", b.ID)
	_, err := setBlockers(ctx, e.st, c.ID, a.ID)
	wantCycle(t, "c blocked by a", err, "blockedByIssueIds", c, a, b, c)
	_, err = setBlockers(ctx, e.st, b.ID, c.ID, a.ID)
	wantCycle(t, "b blocked by a", err, "blockedByIssueIds", b, a, b)
	if got := getIssue(t, e.st, b.ID); got.UnresolvedBlockerCount != 1 {
		t.Errorf("b after a refused PATCH: unresolvedBlockerCount %d, want 1 (unchanged)", got.UnresolvedBlockerCount)
	}
}

// D3: a parent that is the issue or one of its descendants is a cycle.
func testD3ParentCycle(t *testing.T, open opener) {
	e := newDepEnv(t, open)
	ctx := t.Context()
	top := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	mid := depIssue(t, e, clasp.IssueTodo, "", top.ID)
	leaf := depIssue(t, e, clasp.IssueTodo, "", mid.Identifier)
	if leaf.ParentID == nil || *leaf.ParentID != mid.ID {
		t.Fatalf("leaf parent: got %v, want %s", deref(leaf.ParentID), mid.ID)
	}
	_, err := e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: top.ID, ParentID: ptr(leaf.ID), Actor: boardActor()})
	wantCycle(t, "top under leaf", err, "parentId", top, leaf, mid, top)
	_, err = e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: top.ID, ParentID: ptr(top.ID), Actor: boardActor()})
	wantCode(t, "top under itself", err, clasp.CodePreconditionFailed)
	// clearing a parent
	got, err := e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: leaf.ID, ParentID: ptr(""), Actor: boardActor()})
	if err != nil || got.ParentID != nil {
		t.Errorf("clear parent: got %v, %v; want no parent", got, err)
	}
}

// D3: the cycle check of a long chain of blockers answers quickly.
func testD3DeepChain(t *testing.T, open opener) {
	e := newDepEnv(t, open)
	n := scale(300, 100)
	prev := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	first := prev
	for range n {
		prev = depIssue(t, e, clasp.IssueTodo, "", "", prev.ID)
	}
	start := time.Now()
	_, err := setBlockers(t.Context(), e.st, first.ID, prev.ID)
	if clasp.ErrorCode(err) != clasp.CodeDependencyCycle {
		t.Fatalf("close a chain of %d: got %v, want dependency_cycle", n, err)
	}
	cyc, _ := clasp.AsError(err).Details["cycle"].([]string)
	if len(cyc) != n+2 {
		t.Errorf("cycle of a chain of %d: %d identifiers, want %d", n, len(cyc), n+2)
	}
	t.Logf("cycle check over a chain of %d: %v", n, time.Since(start))
}

// wantCycle checks a 422 dependency_cycle with details.field and
// details.cycle the identifiers of issues.
func wantCycle(t *testing.T, what string, err error, field string, issues ...*clasp.Issue) {
	t.Helper()
	e := clasp.AsError(err)
	if e == nil || e.Code != clasp.CodeDependencyCycle {
		t.Errorf("%s: got %v, want 422 dependency_cycle", what, err)
		return
	}
	var want []string
	for _, i := range issues {
		want = append(want, i.Identifier)
	}
	if got, _ := e.Details["cycle"].([]string); !slices.Equal(got, want) {
		t.Errorf("%s: details.cycle %v, want %v", what, e.Details["cycle"], want)
	}
	if e.Details["field"] != field {
		t.Errorf("%s: details.field %v, want %s", what, e.Details["field"], field)
	}
}

// D4: references to another company's issue or to no issue are 404; to
// the issue itself 422; an agent's references are scoped to its company.
func testD4EdgeRefs(t *testing.T, open opener) {
	e := newDepEnv(t, open)
	ctx := t.Context()
	other := newCompany(t, e.st, "OTHER")
	foreign := newIssue(t, e.st, other.ID, clasp.IssueTodo, "")
	i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	for _, ref := range []string{foreign.ID, foreign.Identifier, "ACME-999", "01900000-0000-7000-8000-000000000000"} {
		_, err := setBlockers(ctx, e.st, i1.ID, ref)
		wantCode(t, "blocker "+ref, err, clasp.CodeNotFound)
		if e := clasp.AsError(err); e != nil && !strings.Contains(e.Message, ref) {
			t.Errorf("blocker %s: message %q does not name the reference", ref, e.Message)
		}
		_, err = e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: i1.ID, ParentID: ptr(ref), Actor: boardActor()})
		wantCode(t, "parent "+ref, err, clasp.CodeNotFound)
	}
	_, err := setBlockers(ctx, e.st, i1.ID, i1.Identifier)
	wantCode(t, "blocked by itself", err, clasp.CodePreconditionFailed)
	if e := clasp.AsError(err); e != nil && e.Details["field"] != "blockedByIssueIds" {
		t.Errorf("blocked by itself: details.field %v", e.Details["field"])
	}
	_, err = e.st.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: e.co.ID, Title: "x", BlockedByIssueIDs: []string{foreign.ID},
		Actor: boardActor()})
	wantCode(t, "create blocked by another company's issue", err, clasp.CodeNotFound)
	// an agent names issues of its own company by identifier
	r := openRun(t, e.st, e.a)
	b := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	got, err := e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: i1.ID, BlockedByIssueIDs: &[]string{strings.ToLower(b.Identifier)},
		Actor: runActor(r)})
	if err != nil {
		t.Fatalf("agent adds a blocker by identifier: %v", err)
	}
	wantReady(t, "agent's blocker", got, 1)
}

// D5: edges on creation and PATCH (the full list replaced, duplicates
// once), one issue.blocker_added / issue.blocker_removed per edge naming
// both issues, issue.parent_changed; an Idempotency-Key replay writes
// nothing.
func testD5EdgeChanges(t *testing.T, open opener) {
	e := newDepEnv(t, open)
	ctx := t.Context()
	b1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	b2 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	b3 := newIssue(t, e.st, e.co.ID, clasp.IssueDone, "")
	p := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	i1 := depIssue(t, e, clasp.IssueTodo, "", p.ID, b1.ID, b1.Identifier, b2.ID)
	wantReady(t, "created", i1, 2)
	if n := len(e.issueActivity(t, i1.ID, clasp.ActionIssueBlockerAdded)); n != 2 {
		t.Errorf("blocker_added rows after create: %d, want 2", n)
	}
	if n := len(e.issueActivity(t, i1.ID, clasp.ActionIssueParentChanged)); n != 1 {
		t.Errorf("parent_changed rows after create: %d, want 1", n)
	}
	idem := &store.IdempotencyParams{ActorID: "board", Key: "k1", RequestHash: "h1"}
	upd := &store.IssueUpdateParams{Ref: i1.ID, BlockedByIssueIDs: &[]string{b2.ID, b3.ID, b3.ID}, Actor: boardActor(), Idempotency: idem}
	got, err := e.st.IssueUpdate(ctx, upd)
	if err != nil {
		t.Fatalf("replace blockers: %v", err)
	}
	wantReady(t, "blockers b2, b3", got, 1)
	added := e.issueActivity(t, i1.ID, clasp.ActionIssueBlockerAdded)
	removed := e.issueActivity(t, i1.ID, clasp.ActionIssueBlockerRemoved)
	if len(added) != 3 || len(removed) != 1 {
		t.Fatalf("after replace: %d blocker_added, %d blocker_removed; want 3, 1", len(added), len(removed))
	}
	wantDetails(t, "blocker_removed", removed[0], map[string]string{"blockerIssueId": b1.ID, "blockerIdentifier": b1.Identifier,
		"identifier": i1.Identifier})
	n := len(e.issueActivity(t, i1.ID, ""))
	idem2 := *idem
	upd.Idempotency = &idem2
	if _, err := e.st.IssueUpdate(ctx, upd); err != nil || !idem2.Replayed {
		t.Fatalf("replay: %v (replayed %v)", err, idem2.Replayed)
	}
	if m := len(e.issueActivity(t, i1.ID, "")); m != n {
		t.Errorf("replay wrote %d activity rows, want none", m-n)
	}
	got, err = e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: i1.ID, ParentID: ptr(""), Actor: boardActor()})
	if err != nil || got.ParentID != nil {
		t.Fatalf("clear parent: %v, %v", got, err)
	}
	pc := e.issueActivity(t, i1.ID, clasp.ActionIssueParentChanged)
	if len(pc) != 2 {
		t.Fatalf("parent_changed rows: %d, want 2", len(pc))
	}
	wantDetails(t, "parent cleared", pc[0], map[string]string{"parentId": "", "previousParentId": p.ID})
}

// D6: reopening a done blocker is allowed; its dependent, in progress
// already, keeps its lock (its run may check it out again) and is no
// longer dependency-ready.
func testD6ReopenedBlocker(t *testing.T, open opener) {
	e := newDepEnv(t, open)
	b := newIssue(t, e.st, e.co.ID, clasp.IssueDone, "")
	i1 := depIssue(t, e, clasp.IssueTodo, "", "", b.ID)
	wantReady(t, "blocked by a done issue", i1, 0)
	r1 := openRun(t, e.st, e.a)
	mustCheckout(t, e.st, r1, i1.ID, clasp.IssueTodo)
	mustStatus(t, e.st, b.ID, clasp.IssueTodo)
	got := getIssue(t, e.st, i1.ID)
	wantReady(t, "after the reopen", got, 1)
	wantLock(t, "after the reopen", got, held(e.a.ID, r1.ID, 1))
	again := mustCheckout(t, e.st, r1, i1.ID, clasp.IssueTodo)
	wantLock(t, "checkout again", again, held(e.a.ID, r1.ID, 1))
	_, err := setStatus(t.Context(), e.st, i1.ID, clasp.IssueDone)
	wantBlocked(t, "done while reopened", err, b)
}

// D7: claim-next never takes an issue with a blocker not done.
func testD7ClaimSkipsBlocked(t *testing.T, open opener) {
	e := newDepEnv(t, open)
	ctx := t.Context()
	b := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, e.b.ID) // never eligible for a
	urgent := depIssueP(t, e, clasp.PriorityCritical, "", b.ID)
	mine := depIssueP(t, e, clasp.PriorityCritical, e.a.ID, b.ID)
	plain := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	r := openRun(t, e.st, e.a)
	got, err := e.st.IssueClaim(ctx, &store.IssueClaimParams{Actor: runActor(r)})
	if err != nil || got == nil || got.ID != plain.ID {
		t.Fatalf("claim: got %v, %v; want %s (the blocked ones are skipped)", got, err, plain.Identifier)
	}
	for _, s := range []store.ClaimScope{store.ClaimAny, store.ClaimMine, store.ClaimUnassigned} {
		r2 := openRun(t, e.st, e.a)
		got, err = e.st.IssueClaim(ctx, &store.IssueClaimParams{Scope: s, Actor: runActor(r2)})
		if err != nil || got != nil {
			t.Errorf("claim %s with only blocked issues: got %v, %v; want none", s, got, err)
		}
	}
	mustStatus(t, e.st, b.ID, clasp.IssueDone)
	r3 := openRun(t, e.st, e.a)
	got, err = e.st.IssueClaim(ctx, &store.IssueClaimParams{Actor: runActor(r3)})
	if err != nil || got == nil || (got.ID != urgent.ID && got.ID != mine.ID) {
		t.Errorf("claim after the blocker is done: got %v, %v; want %s or %s", got, err, urgent.Identifier, mine.Identifier)
	}
}

// depIssueP is depIssue of a todo issue with a priority.
func depIssueP(t *testing.T, e *env, prio clasp.Priority, assignee string, blockers ...string) *clasp.Issue {
	t.Helper()
	iss, err := e.st.IssueCreate(t.Context(), &store.IssueCreateParams{CompanyID: e.co.ID, Title: "dep", Status: clasp.IssueTodo,
		Priority: prio, AssigneeAgentID: assignee, BlockedByIssueIDs: blockers, Actor: boardActor()})
	if err != nil {
		t.Fatalf("setup: create issue: %v", err)
	}
	return iss
}

// D9: IssueRelations (blockers, dependents by identifier number,
// unresolved ids, ancestors nearest first), the inbox's readiness, and the
// list's Ready and ParentID filters.
func testD9Relations(t *testing.T, open opener) {
	e := newDepEnv(t, open)
	ctx := t.Context()
	top := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	mid := depIssue(t, e, clasp.IssueTodo, "", top.ID)
	b1 := newIssue(t, e.st, e.co.ID, clasp.IssueDone, "")
	b2 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	i1 := depIssue(t, e, clasp.IssueTodo, e.a.ID, mid.ID, b2.ID, b1.ID)
	dep := depIssue(t, e, clasp.IssueTodo, "", "", i1.ID)
	rel, err := e.st.IssueRelations(ctx, e.co.ID, []string{i1.ID, b2.ID, "nope"})
	if err != nil {
		t.Fatal(err)
	}
	r := rel[i1.ID]
	if r == nil || len(rel) != 2 {
		t.Fatalf("relations: %d entries (%v), want 2 with %s", len(rel), rel, i1.Identifier)
	}
	ids := func(s []clasp.IssueSummary) []string {
		var out []string
		for _, x := range s {
			out = append(out, x.Identifier)
		}
		return out
	}
	if got, want := ids(r.BlockedBy), []string{b1.Identifier, b2.Identifier}; !slices.Equal(got, want) {
		t.Errorf("blockedBy %v, want %v", got, want)
	}
	if got, want := ids(r.Blocks), []string{dep.Identifier}; !slices.Equal(got, want) {
		t.Errorf("blocks %v, want %v", got, want)
	}
	if got, want := r.UnresolvedBlockerIssueIDs, []string{b2.ID}; !slices.Equal(got, want) {
		t.Errorf("unresolved %v, want %v", got, want)
	}
	if got, want := ids(r.Ancestors), []string{mid.Identifier, top.Identifier}; !slices.Equal(got, want) {
		t.Errorf("ancestors %v, want %v", got, want)
	}
	if got := ids(rel[b2.ID].Blocks); !slices.Equal(got, []string{i1.Identifier}) {
		t.Errorf("b2 blocks %v, want [%s]", got, i1.Identifier)
	}
	got := getIssue(t, e.st, i1.ID)
	if got.ParentID == nil || *got.ParentID != mid.ID {
		t.Errorf("parentId %v, want %s", deref(got.ParentID), mid.ID)
	}
	wantReady(t, "get", got, 1)
	inbox, err := e.st.IssueInbox(ctx, e.a.ID)
	if err != nil || len(inbox) != 1 {
		t.Fatalf("inbox: %v, %v", inbox, err)
	}
	it := inbox[0]
	if it.UnresolvedBlockerCount != 1 || it.DependencyReady || !slices.Equal(it.UnresolvedBlockerIssueIDs, []string{b2.ID}) ||
		deref(it.ParentID) != mid.ID {
		t.Errorf("inbox item: %+v", it)
	}
	list, _, err := e.st.IssueList(ctx, &store.IssueListParams{CompanyID: e.co.ID, Ready: true, Page: store.Page{Limit: 100}})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range list {
		if x.ID == i1.ID || x.ID == dep.ID || !x.DependencyReady {
			t.Errorf("list ready: has %s (count %d)", x.Identifier, x.UnresolvedBlockerCount)
		}
	}
	if len(list) != 4 {
		t.Errorf("list ready: %d issues, want 4", len(list))
	}
	children, _, err := e.st.IssueList(ctx, &store.IssueListParams{CompanyID: e.co.ID, ParentID: mid.ID, Page: store.Page{Limit: 100}})
	if err != nil {
		t.Fatal(err)
	}
	if len(children) != 1 || children[0].ID != i1.ID {
		t.Errorf("children of %s: %d issues, want only %s", mid.Identifier, len(children), i1.Identifier)
	}
}

// D10: the paths that change a status besides PATCH keep the counts: a
// child released (in_progress to todo) and a blocker's agent terminated.
func testD10StatusPathsKeepCounts(t *testing.T, open opener) {
	e := newDepEnv(t, open)
	ctx := t.Context()
	parent := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	child := depIssue(t, e, clasp.IssueTodo, e.a.ID, parent.ID)
	if got := getIssue(t, e.st, parent.ID); got.ID == "" {
		t.Fatal("parent")
	}
	r := openRun(t, e.st, e.a)
	mustCheckout(t, e.st, r, child.ID, clasp.IssueTodo)
	if _, err := release(ctx, e.st, runActor(r), child.ID, false); err != nil {
		t.Fatal(err)
	}
	mustStatus(t, e.st, child.ID, clasp.IssueCancelled)
	mustStatus(t, e.st, child.ID, clasp.IssueTodo)
	blocker := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, e.b.ID)
	dep := depIssue(t, e, clasp.IssueTodo, "", "", blocker.ID)
	r2 := openRun(t, e.st, e.b)
	mustCheckout(t, e.st, r2, blocker.ID, clasp.IssueTodo)
	if _, err := e.st.AgentUpdate(ctx, &store.AgentUpdateParams{AgentID: e.b.ID, Status: ptr(clasp.AgentTerminated), Actor: boardActor()}); err != nil {
		t.Fatal(err)
	}
	wantReady(t, "dependent of a released blocker", getIssue(t, e.st, dep.ID), 1)
	mustStatus(t, e.st, blocker.ID, clasp.IssueDone)
	wantReady(t, "dependent of a done blocker", getIssue(t, e.st, dep.ID), 0)
}

// D1 race: a checkout of an issue against a concurrent reopen of its only
// (done) blocker, over many rounds. Each outcome is that of some serial
// order: a refused checkout is blocked_by_unresolved naming the blocker; a
// successful one leaves the issue locked with the count of the reopen
// (1); a reopen that had returned before the checkout began is never
// followed by a successful checkout; the counts always agree (D10).
func testD1RaceCheckoutVsReopen(t *testing.T, open opener) {
	e := newDepEnv(t, open)
	ctx := t.Context()
	rounds := scale(100, 20)
	var won, refused int
	for k := range rounds {
		b := newIssue(t, e.st, e.co.ID, clasp.IssueDone, "")
		i1 := depIssue(t, e, clasp.IssueTodo, "", "", b.ID)
		r := openRun(t, e.st, e.a)
		var (
			cout            *clasp.Issue
			cerr            error
			reopenedAt      atomic.Int64
			checkoutStarted atomic.Int64
		)
		race(2, func(g int) {
			if g == 0 {
				if k%3 == 1 {
					time.Sleep(time.Millisecond)
				}
				checkoutStarted.Store(time.Now().UnixNano())
				cout, cerr = checkout(ctx, e.st, r, i1.ID, clasp.IssueTodo)
				return
			}
			if k%3 == 2 {
				time.Sleep(time.Millisecond)
			}
			if _, err := setStatus(ctx, e.st, b.ID, clasp.IssueTodo); err != nil {
				t.Errorf("round %d: reopen: %v", k, err)
			}
			reopenedAt.Store(time.Now().UnixNano())
		})
		got := getIssue(t, e.st, i1.ID)
		wantReady(t, fmt.Sprintf("round %d", k), got, 1)
		switch {
		case cerr == nil:
			won++
			wantLock(t, fmt.Sprintf("round %d: won", k), got, held(e.a.ID, r.ID, 1))
			// the row the checkout wrote is the one it decided on: had the
			// reopen's count been there, it would have been refused
			wantReady(t, fmt.Sprintf("round %d: the checkout's answer", k), cout, 0)
			if reopenedAt.Load() < checkoutStarted.Load() {
				t.Errorf("round %d: the checkout succeeded although the reopen had returned before it began", k)
			}
		default:
			refused++
			wantBlocked(t, fmt.Sprintf("round %d: refused", k), cerr, b)
			if got.Status != clasp.IssueTodo || got.CheckoutRunID != nil {
				t.Errorf("round %d: refused, but the issue is %s locked by %v", k, got.Status, deref(got.CheckoutRunID))
			}
		}
	}
	t.Logf("checkout vs reopen, %d rounds: %d checkouts won, %d refused", rounds, won, refused)
}

// D3 race: the two halves of a cycle added at once: exactly one succeeds,
// the other is dependency_cycle.
func testD3RaceCycleHalves(t *testing.T, open opener) {
	e := newDepEnv(t, open)
	ctx := t.Context()
	rounds := scale(100, 20)
	for k := range rounds {
		a := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
		b := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
		var errs [2]error
		race(2, func(g int) {
			if g == 0 {
				_, errs[g] = setBlockers(ctx, e.st, a.ID, b.ID)
			} else {
				_, errs[g] = setBlockers(ctx, e.st, b.ID, a.ID)
			}
		})
		ok := 0
		for g, err := range errs {
			switch clasp.ErrorCode(err) {
			case "":
				ok++
			case clasp.CodeDependencyCycle:
			default:
				t.Errorf("round %d, half %d: %v", k, g, err)
			}
		}
		if ok != 1 {
			t.Errorf("round %d: %d halves succeeded (%v), want exactly 1", k, ok, errs)
		}
	}
	t.Logf("cycle halves, %d rounds: one half each", rounds)
}

// D7 race: claim-next against a concurrent reopen of the only eligible
// issue's blocker: the claim takes it only when it comes first in a serial
// order (never after a reopen that had returned before the claim began),
// and the counts agree.
func testD7RaceClaimVsReopen(t *testing.T, open opener) {
	e := newDepEnv(t, open)
	ctx := t.Context()
	rounds := scale(100, 20)
	var won, none int
	for k := range rounds {
		co := newCompany(t, e.st, fmt.Sprintf("CL%s", letters(k)))
		ag := newAgent(t, e.st, co.ID, "claimer")
		other := newAgent(t, e.st, co.ID, "other")
		b := newIssue(t, e.st, co.ID, clasp.IssueDone, other.ID) // never eligible for ag
		i1, err := e.st.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: co.ID, Title: "x", Status: clasp.IssueTodo,
			BlockedByIssueIDs: []string{b.ID}, Actor: boardActor()})
		if err != nil {
			t.Fatal(err)
		}
		r := openRun(t, e.st, ag)
		var (
			got                      *clasp.Issue
			cerr                     error
			reopenedAt, claimStarted atomic.Int64
		)
		race(2, func(g int) {
			if g == 0 {
				if k%3 == 1 {
					time.Sleep(time.Millisecond)
				}
				claimStarted.Store(time.Now().UnixNano())
				got, cerr = e.st.IssueClaim(ctx, &store.IssueClaimParams{Actor: runActor(r)})
				return
			}
			if k%3 == 2 {
				time.Sleep(time.Millisecond)
			}
			if _, err := setStatus(ctx, e.st, b.ID, clasp.IssueTodo); err != nil {
				t.Errorf("round %d: reopen: %v", k, err)
			}
			reopenedAt.Store(time.Now().UnixNano())
		})
		if cerr != nil {
			t.Fatalf("round %d: claim: %v", k, cerr)
		}
		row := getIssue(t, e.st, i1.ID)
		wantReady(t, fmt.Sprintf("round %d", k), row, 1)
		if got != nil {
			won++
			if got.ID != i1.ID {
				t.Errorf("round %d: claimed %s, want %s", k, got.Identifier, i1.Identifier)
			}
			wantReady(t, fmt.Sprintf("round %d: the claim's answer", k), got, 0)
			if reopenedAt.Load() < claimStarted.Load() {
				t.Errorf("round %d: the claim took the issue although the reopen had returned before it began", k)
			}
		} else {
			none++
			if row.Status != clasp.IssueTodo {
				t.Errorf("round %d: nothing claimed, but the issue is %s", k, row.Status)
			}
		}
		checkDepCounts(t, e.st, co.ID)
	}
	t.Logf("claim vs reopen, %d rounds: %d claims took the issue, %d took none", rounds, won, none)
}

// letters is k as upper-case letters (an issue prefix).
func letters(k int) string {
	s := ""
	for {
		s = string(rune('A'+k%26)) + s
		k /= 26
		if k == 0 {
			return s
		}
	}
}

// D10 property: random PATCHes of statuses, blockers and parents, and
// checkouts and releases, from several goroutines at once over a few
// issues: afterwards the counts agree with the edges (newDepEnv), every
// refusal is one of the dependency or lock codes, and no chain of blockers
// or parents is a cycle.
func testD10PropertyRandomOps(t *testing.T, open opener) {
	e := newDepEnv(t, open)
	ctx := t.Context()
	var issues []*clasp.Issue
	for range 12 {
		issues = append(issues, newIssue(t, e.st, e.co.ID, clasp.IssueTodo, ""))
	}
	statuses := []clasp.IssueStatus{clasp.IssueBacklog, clasp.IssueTodo, clasp.IssueInReview, clasp.IssueBlocked,
		clasp.IssueDone, clasp.IssueCancelled}
	ops := scale(150, 30)
	race(4, func(g int) {
		rng := rand.New(rand.NewPCG(uint64(g), 7)) // #nosec G115 G404 -- a reproducible schedule per goroutine index (g >= 0), not a secret
		agent := []*clasp.Agent{e.a, e.b}[g%2]
		run := openRun(t, e.st, agent)
		pick := func() *clasp.Issue { return issues[rng.IntN(len(issues))] }
		for range ops {
			var err error
			i := pick()
			switch rng.IntN(5) {
			case 0:
				_, err = setStatus(ctx, e.st, i.ID, statuses[rng.IntN(len(statuses))])
			case 1:
				var bl []string
				for range rng.IntN(3) {
					bl = append(bl, pick().ID)
				}
				_, err = setBlockers(ctx, e.st, i.ID, bl...)
			case 2:
				p := ""
				if rng.IntN(3) > 0 {
					p = pick().ID
				}
				_, err = e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: i.ID, ParentID: &p, Actor: boardActor()})
			case 3:
				_, err = checkout(ctx, e.st, run, i.ID, clasp.IssueTodo, clasp.IssueBacklog, clasp.IssueInReview, clasp.IssueBlocked)
			case 4:
				_, err = release(ctx, e.st, runActor(run), i.ID, rng.IntN(2) == 0)
			}
			switch clasp.ErrorCode(err) {
			case "", clasp.CodeBlockedByUnresolved, clasp.CodeDependencyCycle, clasp.CodePreconditionFailed,
				clasp.CodeCheckoutConflict, clasp.CodeOwnershipConflict:
			default:
				t.Errorf("goroutine %d: %v", g, err)
			}
		}
	})
	rel, err := e.st.IssueRelations(ctx, e.co.ID, func() []string {
		var ids []string
		for _, i := range issues {
			ids = append(ids, i.ID)
		}
		return ids
	}())
	if err != nil {
		t.Fatal(err)
	}
	// no cycle of blockers: a depth-first walk finds no back edge
	state := map[string]int{}
	var visit func(id string) bool
	visit = func(id string) bool {
		switch state[id] {
		case 1:
			return false
		case 2:
			return true
		}
		state[id] = 1
		if r := rel[id]; r != nil {
			for _, b := range r.BlockedBy {
				if !visit(b.ID) {
					return false
				}
			}
		}
		state[id] = 2
		return true
	}
	for _, i := range issues {
		if !visit(i.ID) {
			t.Errorf("a cycle of blockers through %s", i.Identifier)
		}
		if r := rel[i.ID]; r != nil && len(r.Ancestors) >= len(issues) {
			t.Errorf("%s has %d ancestors: a cycle of parents", i.Identifier, len(r.Ancestors))
		}
	}
}
