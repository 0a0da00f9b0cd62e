package httpapi

import (
	"context"
	"net/http"
	"runtime"
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

// TestCredentialCacheRefreshAhead: an entry is believed for ttl from its
// own verification; the first get in the last quarter of that ttl (and
// only the first, while its refresh runs) is told to refresh it; a
// refresh's answer replaces the entry from the refresh's begin, a
// refusal (401) drops it, another error or a forget since the refresh
// began leaves it to expire at its own ttl, and a refresh left
// unfinished never extends it.
func TestCredentialCacheRefreshAhead(t *testing.T) {
	t.Parallel()
	const ttl = 400 * time.Millisecond
	clk := &testClock{t: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)}
	c := newCredCache(ttl, clk.Now)
	agent := &clasp.Agent{ID: "agent-1", CompanyID: "co-1"}
	fresh := func() {
		at, gen := c.begin()
		c.put(at, gen, "h", "r", agent, nil)
	}
	get := func(what string, wantOK, wantRefresh bool) {
		t.Helper()
		a, _, ok, refresh := c.get("h", "r")
		if ok != wantOK || refresh != wantRefresh || ok && (a == nil || a.ID != agent.ID) {
			t.Fatalf("%s: got agent %v, ok %v, refresh %v; want ok %v, refresh %v", what, a, ok, refresh, wantOK, wantRefresh)
		}
	}

	fresh()
	get("new entry", true, false)
	clk.Advance(ttl/2 + ttl/4 - time.Millisecond)
	get("just before the last quarter", true, false)
	clk.Advance(time.Millisecond)
	at, gen := c.begin()
	get("first get in the last quarter", true, true)
	get("second get while the refresh runs", true, false)
	c.refreshed(at, gen, "h", "r", agent, nil, nil)
	clk.Advance(ttl / 2) // ttl + ttl/4 after the first verification
	get("after the refresh stored its answer", true, false)

	clk.Advance(ttl / 4)
	at, gen = c.begin()
	get("refresh that the store refuses", true, true)
	c.refreshed(at, gen, "h", "r", nil, nil, clasp.Errorf(clasp.CodeUnauthenticated, "revoked"))
	get("after the store refused the key", false, false)

	fresh()
	clk.Advance(ttl - ttl/4)
	at, gen = c.begin()
	get("refresh that fails", true, true)
	c.refreshed(at, gen, "h", "r", nil, nil, context.DeadlineExceeded)
	at, gen = c.begin()
	get("after a failed refresh", true, true)
	c.forgetKey("other") // any forget makes an answer read across it stale
	c.refreshed(at, gen, "h", "r", agent, nil, nil)
	get("after a refresh read across a forget", true, true)
	clk.Advance(ttl / 4)
	get("ttl after the entry's own verification, its refresh unfinished", false, false)
}

// TestCredentialRefreshFindsRevocation: a key in steady use on server b
// is read again in the background once its cached entry is in the last
// quarter of its ttl; when that read finds the key revoked (through
// server a, which told b nothing), b refuses the key from then on,
// without waiting for the entry's ttl to pass. The servers run on a test
// clock; the test waits for the background read by the store's count of
// key reads and for its answer by the cache's entry, not by time.
func TestCredentialRefreshFindsRevocation(t *testing.T) {
	t.Parallel()
	clk := &testClock{t: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)}
	a := setup(t, func(o *setupOpts) { o.now = clk.Now })
	cnt := &countingAuth{Store: a.st}
	b := setup(t, func(o *setupOpts) { o.store = cnt; o.now = clk.Now })
	b.board = a.board
	w := a.world("RF")
	var k clasp.APIKey
	a.must(http.StatusCreated, "POST", "/api/agents/"+w.a.ID+"/keys", req{body: map[string]any{}}, &k)
	b.must(http.StatusOK, "GET", "/api/agents/me", req{token: k.Token}, nil)
	if n := cnt.reads.Load(); n != 1 {
		t.Fatalf("first request on b: %d key reads, want 1", n)
	}
	a.must(http.StatusOK, "DELETE", "/api/agents/"+w.a.ID+"/keys/"+k.ID, req{}, nil)
	clk.Advance(DefaultCredentialCacheTTL - DefaultCredentialCacheTTL/4)
	// Still inside the revocation bound: b answers from its cache and
	// reads the key again in the background.
	b.must(http.StatusOK, "GET", "/api/agents/me", req{token: k.Token}, nil)
	hash := HashToken(k.Token)
	for {
		if _, _, ok, _ := b.srv.creds.get(hash, ""); !ok {
			break
		}
		runtime.Gosched()
	}
	if n := cnt.reads.Load(); n != 2 {
		t.Errorf("key reads on b: %d, want 2 (the first request's and the refresh's)", n)
	}
	wantErr(t, b.do("GET", "/api/agents/me", req{token: k.Token}), http.StatusUnauthorized, clasp.CodeUnauthenticated, "")
}
