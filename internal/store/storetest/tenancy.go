package storetest

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// S25 (store level): an agent of company C1 reaching an issue of company C2
// by UUID or identifier gets 404 not_found from get, checkout, release,
// comment, comment list, update and run open, and nothing changes.
func testS25OtherCompanyNotFound(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	c2 := newCompany(t, e.st, "OTHER")
	x := newAgent(t, e.st, c2.ID, "xeno")
	rx := openRun(t, e.st, x)
	theirs := newIssue(t, e.st, c2.ID, clasp.IssueTodo, "")
	locked := newIssue(t, e.st, c2.ID, clasp.IssueTodo, "")
	locked = mustCheckout(t, e.st, rx, locked.ID, clasp.IssueTodo)
	ra := openRun(t, e.st, e.a)

	for _, iss := range []*clasp.Issue{theirs, locked} {
		for _, ref := range []string{iss.ID, iss.Identifier, strings.ToLower(iss.Identifier)} {
			what := func(op string) string { return fmt.Sprintf("%s of %s by C1's agent", op, ref) }
			_, err := e.st.IssueGet(ctx, e.co.ID, ref)
			wantCode(t, what("get"), err, clasp.CodeNotFound)
			_, err = checkout(ctx, e.st, ra, ref, clasp.IssueTodo)
			wantCode(t, what("checkout"), err, clasp.CodeNotFound)
			_, err = release(ctx, e.st, runActor(ra), ref, true)
			wantCode(t, what("release"), err, clasp.CodeNotFound)
			_, err = e.st.CommentCreate(ctx, &store.CommentCreateParams{Ref: ref, Body: "hi", Actor: runActor(ra)})
			wantCode(t, what("comment"), err, clasp.CodeNotFound)
			_, err = e.st.CommentList(ctx, &store.CommentListParams{Ref: ref, CompanyID: e.co.ID, Limit: 10})
			wantCode(t, what("comment list"), err, clasp.CodeNotFound)
			_, err = e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: ref, Title: ptr("mine"), Status: ptr(clasp.IssueDone), Actor: runActor(ra)})
			wantCode(t, what("update"), err, clasp.CodeNotFound)
			p := runOpenParams(e.a, leaseTTL)
			p.IssueID = ref
			_, err = e.st.RunOpen(ctx, p)
			wantCode(t, what("run open"), err, clasp.CodeNotFound)
		}
		wantUnchanged(t, "after C1's attempts", e.st, iss)
		cs, err := e.st.CommentList(ctx, &store.CommentListParams{Ref: iss.ID, Limit: 10})
		if err != nil || len(cs) != 0 {
			t.Errorf("comments of %s: got %d, %v, want 0, nil", iss.Identifier, len(cs), err)
		}
	}
	if got, err := e.st.IssueGet(ctx, c2.ID, theirs.Identifier); err != nil || got.ID != theirs.ID {
		t.Errorf("C2-scoped get of %s: got %v, %v, want the issue", theirs.Identifier, got, err)
	}
	rows := allActivity(t, e.st, store.ActivityListParams{CompanyID: c2.ID})
	for _, a := range rows {
		if a.ActorID == e.a.ID {
			t.Errorf("C2 activity written by C1's agent: %s on %s", a.Action, a.EntityID)
		}
	}
	if rows := allActivity(t, e.st, store.ActivityListParams{CompanyID: e.co.ID}); len(rows) > 0 {
		for _, a := range rows {
			if a.EntityID == theirs.ID || a.EntityID == locked.ID {
				t.Errorf("C1 activity names C2's issue: %s on %s", a.Action, a.EntityID)
			}
		}
	}
}

// S27: 50 concurrent issue creations in one company get PREFIX-1..PREFIX-50,
// no gap, no repeat.
func testS27ConcurrentIdentifiers(t *testing.T, open opener) {
	e := newEnv(t, open)
	const n = 50
	var idents [n]string
	var errs [n]error
	race(n, func(i int) {
		iss, err := e.st.IssueCreate(t.Context(), &store.IssueCreateParams{CompanyID: e.co.ID, Title: fmt.Sprintf("concurrent %d", i), Actor: boardActor()})
		errs[i] = err
		if err == nil {
			idents[i] = iss.Identifier
		}
	})
	var nums []int
	for i, err := range errs {
		if err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
		num, ok := strings.CutPrefix(idents[i], "ACME-")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			t.Fatalf("identifier %q: want ACME-<n>", idents[i])
		}
		nums = append(nums, v)
	}
	sort.Ints(nums)
	want := make([]int, n)
	for i := range want {
		want[i] = i + 1
	}
	if diff := cmp.Diff(want, nums); diff != "" {
		t.Errorf("identifier numbers (-want +got):\n%s", diff)
	}
	if iss := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, ""); iss.Identifier != "ACME-51" {
		t.Errorf("next identifier: got %q, want ACME-51", iss.Identifier)
	}
	c2 := newCompany(t, e.st, "OTHER")
	if iss := newIssue(t, e.st, c2.ID, clasp.IssueTodo, ""); iss.Identifier != "OTHER-1" {
		t.Errorf("first identifier of another company: got %q, want OTHER-1", iss.Identifier)
	}
}
