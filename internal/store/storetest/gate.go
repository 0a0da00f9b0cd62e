package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// G2: completedEpoch is the checkoutEpoch of the statement that moved the
// issue to done, by the holder's PATCH or the board's; null while the
// issue is not done (never done, reopened).
func testGateCompletedEpoch(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	want := func(what string, iss *clasp.Issue, w *int64) {
		t.Helper()
		if (iss.CompletedEpoch == nil) != (w == nil) || (w != nil && *iss.CompletedEpoch != *w) {
			t.Errorf("%s: got completedEpoch %v, want %v", what, fmtEpoch(iss.CompletedEpoch), fmtEpoch(w))
		}
	}
	want("new", i1, nil)
	r1 := openRun(t, e.st, e.a)
	want("checked out", mustCheckout(t, e.st, r1, i1.ID, clasp.IssueTodo), nil)
	if _, err := release(ctx, e.st, runActor(r1), i1.ID, false); err != nil {
		t.Fatal(err)
	}
	mustCheckout(t, e.st, r1, i1.ID, clasp.IssueTodo) // epoch 2
	iss, err := e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: i1.ID, Status: ptr(clasp.IssueDone), Actor: runActor(r1)})
	if err != nil {
		t.Fatal(err)
	}
	want("holder PATCH done", iss, ptr(int64(2)))
	want("read", getIssue(t, e.st, i1.Identifier), ptr(int64(2)))
	iss, err = e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: i1.ID, Title: ptr("renamed"), Actor: boardActor()})
	if err != nil {
		t.Fatal(err)
	}
	want("done, retitled", iss, ptr(int64(2)))
	iss, err = e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: i1.ID, Status: ptr(clasp.IssueTodo), Actor: boardActor()})
	if err != nil {
		t.Fatal(err)
	}
	want("reopened", iss, nil)
	r2 := openRun(t, e.st, e.a)
	mustCheckout(t, e.st, r2, i1.ID, clasp.IssueTodo) // epoch 3
	iss, err = e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: i1.ID, Status: ptr(clasp.IssueDone), Actor: boardActor()})
	if err != nil {
		t.Fatal(err)
	}
	want("board PATCH done", iss, ptr(int64(3)))
	if iss.CheckoutEpoch != 3 {
		t.Errorf("got checkoutEpoch %d, want 3", iss.CheckoutEpoch)
	}
}

func fmtEpoch(p *int64) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}

// G1-G3: the gate's verdicts, read in one call for many stamps: held by
// a live run at the epoch, completed at it, superseded, held by a dead
// run, not held, never reached, another company's or no issue.
func testGateCheck(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	other := newCompany(t, e.st, "OTHER")
	oi := newIssue(t, e.st, other.ID, clasp.IssueTodo, "")
	i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "") // held by B at 2 after A at 1
	i2 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "") // done at 1
	i3 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "") // held at 1 by a run now failed
	i4 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "") // released at 1

	ra := openRun(t, e.st, e.a)
	mustCheckout(t, e.st, ra, i1.ID, clasp.IssueTodo)
	if err := e.h.ExpireRunLease(ctx, ra.ID); err != nil {
		t.Fatal(err)
	}
	rb := openRun(t, e.st, e.b)
	if _, err := e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: i1.ID, AssigneeAgentID: ptr(""), Status: ptr(clasp.IssueTodo), Actor: boardActor()}); err != nil {
		t.Fatal(err)
	}
	if iss := mustCheckout(t, e.st, rb, i1.ID, clasp.IssueTodo); iss.CheckoutEpoch != 2 {
		t.Fatalf("B's checkout: got epoch %d, want 2", iss.CheckoutEpoch)
	}
	rc := openRun(t, e.st, e.b)
	mustCheckout(t, e.st, rc, i2.ID, clasp.IssueTodo)
	if _, err := e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: i2.ID, Status: ptr(clasp.IssueDone), Actor: runActor(rc)}); err != nil {
		t.Fatal(err)
	}
	rd := openRun(t, e.st, e.b)
	mustCheckout(t, e.st, rd, i3.ID, clasp.IssueTodo)
	if err := e.h.ExpireRunLease(ctx, rd.ID); err != nil {
		t.Fatal(err)
	}
	mustCheckout(t, e.st, rc, i4.ID, clasp.IssueTodo)
	if _, err := release(ctx, e.st, runActor(rc), i4.ID, false); err != nil {
		t.Fatal(err)
	}

	stamps := []clasp.GateStamp{
		{Issue: i1.Identifier, Epoch: 2}, {Issue: i1.Identifier, Epoch: 1}, {Issue: i2.Identifier, Epoch: 1},
		{Issue: i2.Identifier, Epoch: 0}, {Issue: i3.Identifier, Epoch: 1}, {Issue: i4.Identifier, Epoch: 1},
		{Issue: i1.Identifier, Epoch: 3}, {Issue: oi.Identifier, Epoch: 0}, {Issue: "ACME-999", Epoch: 1},
		{Issue: "acme-1", Epoch: 2},
	}
	got, err := e.st.GateCheck(ctx, e.co.ID, stamps)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		ok     bool
		reason string
	}{
		{true, clasp.GateHeld}, {false, clasp.GateSuperseded}, {true, clasp.GateCompleted},
		{false, clasp.GateSuperseded}, {false, clasp.GateDeadHolder}, {false, clasp.GateNotHeld},
		{false, clasp.GateFuture}, {false, clasp.GateUnknown}, {false, clasp.GateUnknown},
		{true, clasp.GateHeld},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d verdicts, want %d", len(got), len(want))
	}
	for k, w := range want {
		g := got[k]
		if g.OK != w.ok || g.Reason != w.reason {
			t.Errorf("stamp %v: got ok=%v reason=%s (%s), want ok=%v reason=%s", stamps[k], g.OK, g.Reason, g.Message, w.ok, w.reason)
		}
	}
	if s := got[1]; deref(s.CurrentEpoch) != 2 || deref(s.HolderRunID) != rb.ID || deref(s.HolderAgent) != "beta" {
		t.Errorf("superseded verdict: got currentEpoch %v holder %v agent %v, want 2, %s, beta (%s)",
			fmtEpoch(s.CurrentEpoch), deref(s.HolderRunID), deref(s.HolderAgent), rb.ID, s.Message)
	}
	if want := fmt.Sprintf("superseded: %s is at epoch 2, held by run %s of agent beta", i1.Identifier, rb.ID); got[1].Message != want {
		t.Errorf("got message %q, want %q", got[1].Message, want)
	}
	// another company's gate sees its own issue alone
	got, err = e.st.GateCheck(ctx, other.ID, []clasp.GateStamp{{Issue: i1.Identifier, Epoch: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].OK || got[0].Reason != clasp.GateUnknown || got[0].CurrentEpoch != nil {
		t.Errorf("other company: got %+v, want unknown with no state", got[0])
	}
	// the cap
	many := make([]clasp.GateStamp, store.GateMaxStamps+1)
	for k := range many {
		many[k] = clasp.GateStamp{Issue: i1.Identifier, Epoch: 2}
	}
	_, err = e.st.GateCheck(ctx, e.co.ID, many)
	wantCode(t, "1001 stamps", err, clasp.CodeInvalidRequest)
	got, err = e.st.GateCheck(ctx, e.co.ID, many[:store.GateMaxStamps])
	if err != nil || len(got) != store.GateMaxStamps || !got[999].OK {
		t.Errorf("1000 stamps: got %d verdicts, err %v", len(got), err)
	}
}

// Gate tokens: stored hashed, found by hash, listed and revoked within
// their company only.
func testGateTokens(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	other := newCompany(t, e.st, "OTHER")
	h := newTokenHash()
	at := time.Now().UTC().Truncate(time.Microsecond)
	tok, err := e.st.GateTokenCreate(ctx, &store.GateTokenCreateParams{CompanyID: e.co.ID, Name: "ci", TokenHash: h, Prefix: "clasp_gt_x", At: at})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.st.GateTokenCreate(ctx, &store.GateTokenCreateParams{CompanyID: e.co.ID, Name: " ", TokenHash: newTokenHash(), At: at})
	wantCode(t, "empty name", err, clasp.CodeInvalidRequest)
	_, err = e.st.GateTokenCreate(ctx, &store.GateTokenCreateParams{CompanyID: e.co.ID, Name: "dup", TokenHash: h, At: at})
	wantCode(t, "same secret", err, clasp.CodeAlreadyExists)
	found, err := e.st.GateTokenFind(ctx, h)
	if err != nil || found.ID != tok.ID || found.CompanyID != e.co.ID {
		t.Fatalf("find: got %+v, %v", found, err)
	}
	_, err = e.st.GateTokenRevoke(ctx, other.ID, tok.ID, at)
	wantCode(t, "revoke from another company", err, clasp.CodeNotFound)
	rev, err := e.st.GateTokenRevoke(ctx, e.co.ID, tok.ID, at)
	if err != nil || rev.RevokedAt == nil {
		t.Fatalf("revoke: got %+v, %v", rev, err)
	}
	if l, err := e.st.GateTokenList(ctx, other.ID); err != nil || len(l) != 0 {
		t.Errorf("other company's list: got %d, %v; want none", len(l), err)
	}
}

// testBranchTemplate: a company's branch template (RULES.md G5) is
// clasp/{identifier} unless set at create; CompanyUpdate changes it, with
// a company.updated row; a template without {identifier}, with another
// placeholder, or that makes no valid git branch name is 400 naming
// branchTemplate and changes nothing; a missing company is 404.
func testBranchTemplate(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	if e.co.BranchTemplate != clasp.DefaultBranchTemplate {
		t.Errorf("default template %q, want %q", e.co.BranchTemplate, clasp.DefaultBranchTemplate)
	}
	co, err := e.st.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "Templated", IssuePrefix: "TPL", BranchTemplate: "work/{prefix}/{identifier}", Actor: boardActor()})
	if err != nil || co.BranchTemplate != "work/{prefix}/{identifier}" {
		t.Fatalf("create with a template: got %+v, %v", co, err)
	}
	_, err = e.st.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "Bad", IssuePrefix: "BAD", BranchTemplate: "work/{id}", Actor: boardActor()})
	wantField(t, "create with a bad template", err, "branchTemplate")

	tmpl := "agents/{prefix}/{identifier}-work"
	got, err := e.st.CompanyUpdate(ctx, &store.CompanyUpdateParams{ID: e.co.ID, BranchTemplate: &tmpl, Actor: boardActor()})
	if err != nil || got.BranchTemplate != tmpl || got.Name != e.co.Name || got.IssuePrefix != e.co.IssuePrefix {
		t.Fatalf("update: got %+v, %v", got, err)
	}
	if again, err := e.st.CompanyGet(ctx, e.co.ID); err != nil || again.BranchTemplate != tmpl {
		t.Errorf("get after update: got %+v, %v", again, err)
	}
	rows := allActivity(t, e.st, store.ActivityListParams{CompanyID: e.co.ID, Action: clasp.ActionCompanyUpdated})
	if len(rows) != 1 || rows[0].EntityID != e.co.ID {
		t.Errorf("company.updated rows: got %d, want 1 naming the company", len(rows))
	}
	for _, bad := range []string{"", "no-placeholder", "x/{foo}/{identifier}", "a..b/{identifier}", "{identifier}.lock", "/{identifier}", "w/{identifier}/", "w {identifier}", "w/.x/{identifier}", "w:{identifier}", "{identifier}@{x"} {
		b := bad
		_, err := e.st.CompanyUpdate(ctx, &store.CompanyUpdateParams{ID: e.co.ID, BranchTemplate: &b, Actor: boardActor()})
		wantField(t, "template "+bad, err, "branchTemplate")
	}
	if again, err := e.st.CompanyGet(ctx, e.co.ID); err != nil || again.BranchTemplate != tmpl {
		t.Errorf("after refused updates: got %+v, %v; want the template unchanged", again, err)
	}
	_, err = e.st.CompanyUpdate(ctx, &store.CompanyUpdateParams{ID: "00000000-0000-4000-8000-000000000000", BranchTemplate: &tmpl, Actor: boardActor()})
	wantCode(t, "update of no company", err, clasp.CodeNotFound)
}

// wantField checks that err is 400 invalid_request naming field.
func wantField(t *testing.T, what string, err error, field string) {
	t.Helper()
	ce := clasp.AsError(err)
	if ce == nil || ce.Code != clasp.CodeInvalidRequest || ce.Details["field"] != field {
		t.Errorf("%s: got %v, want 400 invalid_request naming %s", what, err, field)
	}
}
