package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// AgentAuthenticateRun: it authenticates a key exactly as
// AgentAuthenticate does, and answers the named run only when it is the
// key's agent's, live, and renewed less than minRenew ago, that is when
// RunTouch without Force would write nothing; then it answers the run as
// RunTouch does. It never renews a lease. Freshness is tested only with a
// one-hour window and with none (0), so no assertion depends on timing.
func testAgentAuthenticateRun(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	key := func(a *clasp.Agent) string {
		t.Helper()
		h := newTokenHash()
		if _, err := e.st.AgentKeyCreate(ctx, &store.AgentKeyCreateParams{AgentID: a.ID, Prefix: "clasp_ak_xyz", TokenHash: h, Actor: boardActor()}); err != nil {
			t.Fatalf("create key of %s: %v", a.Name, err)
		}
		return h
	}
	ha, hb := key(e.a), key(e.b)
	ra, rb := openRun(t, e.st, e.a), openRun(t, e.st, e.b)
	const window = time.Hour

	check := func(what, hash, runID string, minRenew time.Duration, wantAgent string, wantRun bool) *clasp.Run {
		t.Helper()
		a, r, err := e.st.AgentAuthenticateRun(ctx, hash, runID, minRenew)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if a.ID != wantAgent {
			t.Errorf("%s: agent %s, want %s", what, a.ID, wantAgent)
		}
		if wantRun && (r == nil || r.ID != runID) {
			t.Errorf("%s: run %+v, want run %s", what, r, runID)
		}
		if !wantRun && r != nil {
			t.Errorf("%s: run %+v, want none (the caller must call RunTouch)", what, r)
		}
		return r
	}
	check("A's key, no run", ha, "", window, e.a.ID, false)
	fresh := check("A's key, A's live run just opened", ha, ra.ID, window, e.a.ID, true)
	check("A's key, A's run, no renew window", ha, ra.ID, 0, e.a.ID, false)
	check("A's key, B's run", ha, rb.ID, window, e.a.ID, false)
	check("A's key, unknown run", ha, "00000000-0000-4000-8000-000000000000", window, e.a.ID, false)
	check("B's key, B's run", hb, rb.ID, window, e.b.ID, true)

	// The fresh run is the run RunTouch answers without writing.
	touched, err := e.st.RunTouch(ctx, &store.RunTouchParams{RunID: ra.ID, AgentID: e.a.ID, LeaseTTL: leaseTTL, MinRenewInterval: window})
	if err != nil {
		t.Fatalf("RunTouch of A's run: %v", err)
	}
	if diff := cmp.Diff(touched, fresh); diff != "" {
		t.Errorf("fresh run differs from RunTouch's answer (-RunTouch +AgentAuthenticateRun):\n%s", diff)
	}
	// It never renews the lease.
	if _, _, err := e.st.AgentAuthenticateRun(ctx, ha, ra.ID, 0); err != nil {
		t.Fatalf("authenticate: %v", err)
	}
	after, err := e.st.RunGet(ctx, ra.ID)
	if err != nil {
		t.Fatalf("get A's run: %v", err)
	}
	if !after.LeaseExpiresAt.Equal(*ra.LeaseExpiresAt) || !after.LastSignOfLifeAt.Equal(*ra.LastSignOfLifeAt) {
		t.Errorf("lease after AgentAuthenticateRun: expires %v, sign of life %v; want unchanged %v, %v",
			after.LeaseExpiresAt, after.LastSignOfLifeAt, ra.LeaseExpiresAt, ra.LastSignOfLifeAt)
	}

	// Dead runs are never answered.
	lost := openRun(t, e.st, e.a)
	if err := e.h.ExpireRunLease(ctx, lost.ID); err != nil {
		t.Fatalf("expire run: %v", err)
	}
	check("A's key, A's lost run", ha, lost.ID, window, e.a.ID, false)
	done := openRun(t, e.st, e.a)
	if _, err := finish(ctx, e.st, done, clasp.RunSucceeded); err != nil {
		t.Fatalf("finish run: %v", err)
	}
	check("A's key, A's finished run", ha, done.ID, window, e.a.ID, false)

	// Authentication fails as AgentAuthenticate's does.
	_, _, err = e.st.AgentAuthenticateRun(ctx, newTokenHash(), ra.ID, window)
	wantCode(t, "unknown key", err, clasp.CodeUnauthenticated)
	keys, err := e.st.AgentKeyList(ctx, e.a.ID)
	if err != nil || len(keys) != 1 {
		t.Fatalf("A's keys: %v, %v", keys, err)
	}
	if _, err := e.st.AgentKeyRevoke(ctx, e.a.ID, keys[0].ID, boardActor()); err != nil {
		t.Fatalf("revoke A's key: %v", err)
	}
	_, _, err = e.st.AgentAuthenticateRun(ctx, ha, ra.ID, window)
	wantCode(t, "revoked key", err, clasp.CodeUnauthenticated)
	if _, err := e.st.AgentUpdate(ctx, &store.AgentUpdateParams{AgentID: e.b.ID, Status: ptr(clasp.AgentTerminated), Actor: boardActor()}); err != nil {
		t.Fatalf("terminate B: %v", err)
	}
	_, _, err = e.st.AgentAuthenticateRun(ctx, hb, rb.ID, window)
	wantCode(t, "terminated agent's key", err, clasp.CodeUnauthenticated)
}
