package httpapi

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// countingAuth is a store that counts the agent key reads of the servers
// using it (store.AgentAuthenticateRun), to tell a cached credential from
// a read one.
type countingAuth struct {
	store.Store
	reads atomic.Int64
}

func (c *countingAuth) AgentAuthenticateRun(ctx context.Context, hash, runID string, minRenew time.Duration) (*clasp.Agent, *clasp.Run, error) {
	c.reads.Add(1)
	return c.Store.AgentAuthenticateRun(ctx, hash, runID, minRenew)
}

// TestCredentialCacheSavesReads: requests of one agent key naming one
// live run read the key (and the run) from the store once, not once per
// request; the run's lease is still renewed through RunTouch once its
// last sign of life is a renewal window old.
func TestCredentialCacheSavesReads(t *testing.T) {
	t.Parallel()
	clk := &testClock{t: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)}
	a := setup(t, func(o *setupOpts) { o.now = clk.Now })
	cnt := &countingAuth{Store: a.st}
	b := setup(t, func(o *setupOpts) { o.store = cnt; o.now = clk.Now })
	b.board = a.board
	w := a.world("CC")
	for range 20 {
		b.must(http.StatusOK, "GET", "/api/agents/me", req{token: w.ka, run: w.ra1.ID}, nil)
	}
	if n := cnt.reads.Load(); n != 1 {
		t.Errorf("20 requests of one key and run: %d key reads, want 1 (the others from the cache)", n)
	}
	// Past the renewal window the cached run is not fresh any more: the
	// request renews its lease (the store's clock is the test's).
	clk.Advance(2 * MinRenewInterval)
	b.must(http.StatusOK, "GET", "/api/agents/me", req{token: w.ka, run: w.ra1.ID}, nil)
	var got clasp.Run
	b.must(http.StatusOK, "GET", "/api/runs/"+w.ra1.ID, req{}, &got)
	if want := clk.Now().Add(b.srv.lease); got.LeaseExpiresAt == nil || !got.LeaseExpiresAt.Equal(want) {
		t.Errorf("lease after a request past the renewal window: %v, want renewed to %v", got.LeaseExpiresAt, want)
	}
}

// TestCredentialRevocationAcrossReplicas: two servers on one database
// (PostgreSQL: two stores on one schema, each with its own pool and
// listener; SQLite: one store, two servers), each having verified (and
// cached) an agent key. The key is revoked through server a: a refuses it
// at once (its handler forgets the key), and server b, which was told
// nothing, refuses it once the revocation bound has passed: 1 s, more than
// the cache's DefaultCredentialCacheTTL. The servers run on a test clock
// (the cache measures its entries' age on the server's clock), so b serves
// from its cache until the clock is moved on, however slow the machine,
// and the entries it made before the revocation expire exactly when the
// clock passes the bound. b must have served the key from its cache
// before, or the test would not test the cache.
func TestCredentialRevocationAcrossReplicas(t *testing.T) {
	eachStore(t, func(t *testing.T, pg bool) {
		var a, b *bundle
		var cnt *countingAuth
		clk := &testClock{t: time.Now()}
		if pg {
			st, replica := openPostgresSchema(t)
			t.Cleanup(func() { _ = st.Close() })
			a = setup(t, func(o *setupOpts) { o.store = st; o.now = clk.Now })
			cnt = &countingAuth{Store: replica()}
		} else {
			a = setup(t, func(o *setupOpts) { o.now = clk.Now })
			cnt = &countingAuth{Store: a.st}
		}
		b = setup(t, func(o *setupOpts) { o.store = cnt; o.now = clk.Now })
		b.board = a.board
		w := a.world("RX")
		var k clasp.APIKey
		a.must(http.StatusCreated, "POST", "/api/agents/"+w.a.ID+"/keys", req{body: map[string]any{}}, &k)
		for range 3 {
			a.must(http.StatusOK, "GET", "/api/agents/me", req{token: k.Token}, nil)
			b.must(http.StatusOK, "GET", "/api/agents/me", req{token: k.Token}, nil)
		}
		if n := cnt.reads.Load(); n != 1 {
			t.Fatalf("replica b: %d key reads for 3 requests, want 1 (served from its cache)", n)
		}
		a.must(http.StatusOK, "DELETE", "/api/agents/"+w.a.ID+"/keys/"+k.ID, req{}, nil)
		wantErr(t, a.do("GET", "/api/agents/me", req{token: k.Token}), http.StatusUnauthorized, clasp.CodeUnauthenticated, "")
		clk.Advance(time.Second)
		wantErr(t, b.do("GET", "/api/agents/me", req{token: k.Token}), http.StatusUnauthorized, clasp.CodeUnauthenticated, "")
		// The agent's other key is untouched on both.
		a.must(http.StatusOK, "GET", "/api/agents/me", req{token: w.ka}, nil)
		b.must(http.StatusOK, "GET", "/api/agents/me", req{token: w.ka}, nil)
		// Terminating the agent (through a) ends its other key on both,
		// and the run it held on b's cache with it.
		b.must(http.StatusOK, "GET", "/api/agents/me", req{token: w.ka, run: w.ra1.ID}, nil)
		a.must(http.StatusOK, "PATCH", "/api/agents/"+w.a.ID, req{body: map[string]any{"status": "terminated"}}, nil)
		wantErr(t, a.do("GET", "/api/agents/me", req{token: w.ka}), http.StatusUnauthorized, clasp.CodeUnauthenticated, "")
		clk.Advance(time.Second)
		wantErr(t, b.do("GET", "/api/agents/me", req{token: w.ka, run: w.ra1.ID}), http.StatusUnauthorized, clasp.CodeUnauthenticated, "")
	})
}
