package storetest

import (
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// Revocation reaches what a key opened (RULES.md, Actors and
// credentials): revoking a key ends, in the same transaction, every
// queued or running run opened with it (cancelled, errorCode
// key_revoked, one run.finished row), its locks released as at any run
// end; the run's token stops authenticating; runs opened with another
// key of the agent, and runs the key opened that had already ended, are
// left as they are.
func testKeyRevokeEndsItsRuns(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	h, other := newTokenHash(), newTokenHash()
	k, err := e.st.AgentKeyCreate(ctx, &store.AgentKeyCreateParams{AgentID: e.a.ID, Prefix: "clasp_ak_rev", TokenHash: h, Actor: boardActor()})
	if err != nil {
		t.Fatalf("create key: %v", err)
	}
	openWith := func(keyHash string) *clasp.Run {
		p := runOpenParams(e.a, leaseTTL)
		p.KeyHash = keyHash
		r, err := e.st.RunOpen(ctx, p)
		if err != nil {
			t.Fatalf("open run: %v", err)
		}
		return r
	}
	holder, done, kept := openWith(h), openWith(h), openWith(other)
	if _, err := finish(ctx, e.st, done, clasp.RunSucceeded); err != nil {
		t.Fatalf("finish: %v", err)
	}
	iss := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	mustCheckout(t, e.st, holder, iss.ID, clasp.IssueTodo)
	if _, err := e.st.AgentKeyRevoke(ctx, e.a.ID, k.ID, boardActor()); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	got := getRun(t, e.st, holder.ID)
	if got.Status != clasp.RunCancelled || deref(got.ErrorCode) != "key_revoked" || got.FinishedAt == nil {
		t.Errorf("run opened with the revoked key: %s, errorCode %q; want cancelled, key_revoked", got.Status, deref(got.ErrorCode))
	}
	// Both locks are cleared, as at any run's end; the issue stays
	// in_progress and assigned, for its agent to take up in another run.
	wantLock(t, "issue held by the revoked key's run", getIssue(t, e.st, iss.ID), lockState{Status: clasp.IssueInProgress, Assignee: e.a.ID, Epoch: 1})
	if g := getRun(t, e.st, done.ID); g.Status != clasp.RunSucceeded || deref(g.ErrorCode) != "" {
		t.Errorf("a run of the key that had ended: %s, errorCode %q; want it unchanged (succeeded)", g.Status, deref(g.ErrorCode))
	}
	if g := getRun(t, e.st, kept.ID); g.Status != clasp.RunRunning {
		t.Errorf("a run opened with another key: %s, want running", g.Status)
	}
	fin := 0
	for _, a := range allActivity(t, e.st, store.ActivityListParams{CompanyID: e.co.ID}) {
		if a.Action == clasp.ActionRunFinished && a.EntityID == holder.ID {
			fin++
		}
	}
	if fin != 1 {
		t.Errorf("%d run.finished rows for the revoked key's run, want 1", fin)
	}
	// Revoking again ends nothing more and changes nothing.
	if _, err := e.st.AgentKeyRevoke(ctx, e.a.ID, k.ID, boardActor()); err != nil {
		t.Fatalf("revoke again: %v", err)
	}
	if g := getRun(t, e.st, kept.ID); g.Status != clasp.RunRunning {
		t.Errorf("after a second revoke, the other key's run is %s, want running", g.Status)
	}
}

// The live-run limit (RunOpenParams.MaxLive): an agent with that many
// live runs is refused one more (429 rate_limited, details.limit "live
// runs per agent") and nothing is written; a finished or lost run does
// not count; among concurrent opens exactly as many succeed as there are
// places left.
func testRunLiveLimit(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	const limit = 3
	openLimited := func(ttl time.Duration) (*clasp.Run, error) {
		p := runOpenParams(e.a, ttl)
		p.MaxLive = limit
		return e.st.RunOpen(ctx, p)
	}
	var runs []*clasp.Run
	for range limit {
		r, err := openLimited(leaseTTL)
		if err != nil {
			t.Fatalf("open within the limit: %v", err)
		}
		runs = append(runs, r)
	}
	_, err := openLimited(leaseTTL)
	wantCode(t, "open over the limit", err, clasp.CodeRateLimited)
	if ce, ok := err.(*clasp.Error); !ok || ce.Details["limit"] != "live runs per agent" {
		t.Errorf("open over the limit: %v, want details.limit \"live runs per agent\"", err)
	}
	list, _, err := e.st.RunList(ctx, &store.RunListParams{CompanyID: e.co.ID, AgentID: e.a.ID})
	if err != nil || len(list) != limit {
		t.Fatalf("runs of the agent: %d, %v; want %d (the refused open wrote nothing)", len(list), err, limit)
	}
	// Another agent is not limited by this one's runs.
	pb := runOpenParams(e.b, leaseTTL)
	pb.MaxLive = limit
	if _, err := e.st.RunOpen(ctx, pb); err != nil {
		t.Fatalf("another agent's open: %v", err)
	}
	// A finished run frees its place.
	if _, err := finish(ctx, e.st, runs[0], clasp.RunSucceeded); err != nil {
		t.Fatal(err)
	}
	if _, err := openLimited(leaseTTL); err != nil {
		t.Fatalf("open after a finish: %v", err)
	}
	// Concurrent opens of a fresh agent: exactly limit succeed.
	c := newAgent(t, e.st, e.co.ID, "gamma")
	var ok, refused, other int
	results := make([]error, 12)
	race(len(results), func(i int) {
		p := runOpenParams(c, leaseTTL)
		p.MaxLive = limit
		_, results[i] = e.st.RunOpen(ctx, p)
	})
	for _, err := range results {
		switch {
		case err == nil:
			ok++
		case clasp.ErrorCode(err) == clasp.CodeRateLimited:
			refused++
		default:
			other++
			t.Errorf("concurrent open: %v", err)
		}
	}
	if ok != limit {
		t.Errorf("%d of %d concurrent opens succeeded (%d refused), want exactly %d", ok, len(results), refused, limit)
	}
}
