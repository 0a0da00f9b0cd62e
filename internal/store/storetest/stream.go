package storetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// testActivityStream pins store.ActivityStream: a watcher
// is woken after a write that adds activity; ActivityAfter reads a
// company's rows forward from an id, oldest first, never another company's,
// and its through position lets a reader resume without skipping or
// repeating rows; ActivityLatestID is the company's newest row.
func testActivityStream(t *testing.T, open opener) {
	e := newEnv(t, open)
	other := newCompany(t, e.st, "OTHER")
	start, err := e.st.ActivityLatestID(t.Context(), e.co.ID)
	if err != nil {
		t.Fatalf("ActivityLatestID: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	wake := e.st.WatchActivity(ctx)

	i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	newIssue(t, e.st, other.ID, clasp.IssueTodo, "")
	r1 := openRun(t, e.st, e.a)
	mustCheckout(t, e.st, r1, i1.ID, clasp.IssueTodo)
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("WatchActivity: no wake-up within 10 s of a checkout")
	}

	// Read everything after start in pages of 1: the company's rows in
	// order, each once, ending with the checkout.
	var got []*clasp.Activity
	after := start
	for range 100 {
		rows, through, err := e.st.ActivityAfter(t.Context(), e.co.ID, after, 1)
		if err != nil {
			t.Fatalf("ActivityAfter(%d): %v", after, err)
		}
		if through < after {
			t.Fatalf("ActivityAfter(%d): through %d went back", after, through)
		}
		for _, a := range rows {
			if a.CompanyID != e.co.ID || a.ID <= after || a.ID > through {
				t.Fatalf("ActivityAfter(%d) through %d returned row %d of company %s", after, through, a.ID, a.CompanyID)
			}
		}
		got = append(got, rows...)
		if through == after && len(rows) == 0 {
			// Nothing new: done once the newest row has been read.
			if latest, _ := e.st.ActivityLatestID(t.Context(), e.co.ID); len(got) > 0 && got[len(got)-1].ID == latest {
				break
			}
			time.Sleep(10 * time.Millisecond) // a store may hold back a hole briefly
		}
		after = through
	}
	actions := map[string]int{}
	for i, a := range got {
		if i > 0 && a.ID <= got[i-1].ID {
			t.Errorf("rows out of order: %d after %d", a.ID, got[i-1].ID)
		}
		actions[a.Action]++
	}
	if actions[clasp.ActionIssueCreated] != 1 || actions[clasp.ActionIssueCheckedOut] != 1 {
		t.Errorf("streamed actions %v, want one issue.created and one issue.checked_out (and no other company's rows)", actions)
	}
	latest, err := e.st.ActivityLatestID(t.Context(), e.co.ID)
	if err != nil || len(got) == 0 || latest != got[len(got)-1].ID {
		t.Errorf("ActivityLatestID = %d, %v; want the last streamed row's id", latest, err)
	}
	cancel()
	for range wake {
	} // closed when ctx ends
}

// testIssueUpdatedChanges pins the details of issue.updated on every store:
// {"changes": {field: {"from", "to"}}} for each field the PATCH changed, and
// locksCleared with the previous holders when the PATCH cleared the locks
// (rule L6). The swarm and S28 read them to find "done exactly once".
func testIssueUpdatedChanges(t *testing.T, open opener) {
	e := newEnv(t, open)
	i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	r1 := openRun(t, e.st, e.a)
	mustCheckout(t, e.st, r1, i1.ID, clasp.IssueTodo)
	done, title := clasp.IssueDone, "renamed"
	if _, err := e.st.IssueUpdate(t.Context(), &store.IssueUpdateParams{Ref: i1.ID, Status: &done, Title: &title, Actor: runActor(r1)}); err != nil {
		t.Fatalf("PATCH done by the holder: %v", err)
	}
	a := e.oneActivity(t, i1.ID, clasp.ActionIssueUpdated)
	var d struct {
		Changes map[string]struct {
			From any `json:"from"`
			To   any `json:"to"`
		} `json:"changes"`
		LocksCleared           bool   `json:"locksCleared"`
		PreviousCheckoutRunID  string `json:"previousCheckoutRunId"`
		PreviousExecutionRunID string `json:"previousExecutionRunId"`
	}
	if err := json.Unmarshal(a.Details, &d); err != nil {
		t.Fatalf("issue.updated details %s: %v", a.Details, err)
	}
	st, ti := d.Changes["status"], d.Changes["title"]
	if st.From != "in_progress" || st.To != "done" || ti.To != "renamed" || len(d.Changes) != 2 {
		t.Errorf("issue.updated changes = %s, want status in_progress->done and title ->renamed only", a.Details)
	}
	if !d.LocksCleared || d.PreviousCheckoutRunID != r1.ID || d.PreviousExecutionRunID != r1.ID {
		t.Errorf("issue.updated details = %s, want locksCleared with previous holders %s", a.Details, r1.ID)
	}
}
