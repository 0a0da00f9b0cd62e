package httpapi

import (
	"sync"
	"time"

	"github.com/clasp-dev/clasp"
)

// DefaultCredentialCacheTTL is Config.CredentialCacheTTL's default: how
// long a verified agent key (and the live run it named) is believed
// without asking the store again. It bounds how long a change made
// elsewhere (a key revoked, an agent terminated, a run ended through
// another replica, the sweeper or the scheduler) can go unseen by this
// server: half a second, so that a revocation or a pause reaches every
// replica within 0.5 s (sooner where an event stream of the company is
// open: its activity rows make the server forget the entries they name,
// see credCache.forgetRevoked). Changes made through this server's own API are seen at once (the
// handlers forget the entries they invalidate).
const DefaultCredentialCacheTTL = 500 * time.Millisecond

// credCacheMax caps the entries of a credential cache; past it, expired
// entries are dropped, and if none were, all of them.
const credCacheMax = 1 << 16

// credCache remembers, per agent key hash and named run, the answer of
// store.AgentAuthenticateRun for ttl: the agent and, when the store found
// it fresh, the run with the real time it was found so (principal.freshRun,
// freshAt). Refusals are never cached. It is safe for concurrent use.
type credCache struct {
	ttl time.Duration
	now func() time.Time // the server's clock (Config.Now)
	mu  sync.Mutex
	m   map[credKey]credEntry
	// gen counts the forgets: an answer the store gave while one ran may
	// predate the change it forgot, so put drops it (see begin).
	gen uint64
}

type credKey struct{ hash, run string }

type credEntry struct {
	at         time.Time // when the store verified it, on the server's clock
	agent      clasp.Agent
	run        *clasp.Run // nil: not found fresh
	refreshing bool       // a background read of it is under way (get)
}

// newCredCache returns a cache keeping entries for ttl as now measures it
// (the server's clock); nil (no caching) when ttl is not positive.
func newCredCache(ttl time.Duration, now func() time.Time) *credCache {
	if ttl <= 0 {
		return nil
	}
	return &credCache{ttl: ttl, now: now, m: map[credKey]credEntry{}}
}

// get returns a copy of the agent (and of the run, nil when the store did
// not find it fresh) the store verified for key hash and named run less
// than ttl ago. The caller judges whether the run is still fresh. refresh
// is true for the one caller that finds the entry in the last quarter of
// its ttl with no refresh begun: that caller reads the store again in the
// background (Server.refreshCredential) and ends the refresh with
// refreshed, so that a key in steady use is verified again before its
// entry expires instead of on a request's path; the entry is still
// believed only for ttl from its own verification.
func (c *credCache) get(hash, run string) (a *clasp.Agent, r *clasp.Run, ok, refresh bool) {
	if c == nil {
		return nil, nil, false, false
	}
	k := credKey{hash, run}
	c.mu.Lock()
	e, ok := c.m[k]
	age := c.now().Sub(e.at)
	if ok && age < c.ttl && age >= c.ttl-c.ttl/4 && !e.refreshing {
		e.refreshing, refresh = true, true
		c.m[k] = e
	}
	c.mu.Unlock()
	if !ok || age >= c.ttl {
		return nil, nil, false, false
	}
	ag := e.agent
	if e.run != nil {
		cp := *e.run
		r = &cp
	}
	return &ag, r, true, refresh
}

// begin is called before asking the store: it returns the time and the
// generation to give put, so that an entry never outlives ttl from before
// the store's read, and an answer read across a forget is not kept.
func (c *credCache) begin() (time.Time, uint64) {
	if c == nil {
		return time.Time{}, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now(), c.gen
}

// put records what the store verified for key hash and named run, read
// after begin returned at and gen; nothing when a forget ran since.
func (c *credCache) put(at time.Time, gen uint64, hash, run string, a *clasp.Agent, r *clasp.Run) {
	if c == nil || a == nil {
		return
	}
	e := credEntry{at: at, agent: *a}
	if r != nil {
		cp := *r
		e.run = &cp
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	if len(c.m) >= credCacheMax {
		for k, v := range c.m {
			if c.now().Sub(v.at) >= c.ttl {
				delete(c.m, k)
			}
		}
		if len(c.m) >= credCacheMax {
			clear(c.m)
		}
	}
	c.m[credKey{hash, run}] = e
}

// refreshed ends the background refresh that get asked for, of key hash
// and named run, begun (begin) at at and gen: with the store's answer
// (err nil) the entry is replaced as put does; when the store refused
// the key (401) the entry is dropped, so the next request asks the store
// and is refused; on any other error, or when a forget ran since, the
// entry is left as it was, to expire at its own ttl, and the next request
// in its last quarter may refresh it again.
func (c *credCache) refreshed(at time.Time, gen uint64, hash, run string, a *clasp.Agent, r *clasp.Run, err error) {
	if c == nil {
		return
	}
	k := credKey{hash, run}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || !e.refreshing {
		return // forgotten, or replaced by a request's own read
	}
	switch {
	case c.gen != gen:
		e.refreshing = false
		c.m[k] = e
	case err == nil && a != nil:
		ne := credEntry{at: at, agent: *a}
		if r != nil {
			cp := *r
			ne.run = &cp
		}
		c.m[k] = ne
	case clasp.ErrorCode(err) == clasp.CodeUnauthenticated:
		delete(c.m, k)
	default:
		e.refreshing = false
		c.m[k] = e
	}
}

// forgetAgent drops every entry of agent id: its keys or status changed.
func (c *credCache) forgetAgent(id string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for k, v := range c.m {
		if v.agent.ID == id {
			delete(c.m, k)
		}
	}
}

// forgetKey drops every entry of key hash.
func (c *credCache) forgetKey(hash string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for k := range c.m {
		if k.hash == hash {
			delete(c.m, k)
		}
	}
}

// forgetRevoked drops the entries a revoking activity row may have made
// stale (see mayRevoke): its agent's, or its run's.
func (c *credCache) forgetRevoked(rows []*clasp.Activity) {
	for _, a := range rows {
		switch a.Action {
		case clasp.ActionAgentKeyRevoked, clasp.ActionAgentUpdated:
			c.forgetAgent(a.EntityID)
		case clasp.ActionRunFinished, clasp.ActionRunLost:
			c.forgetRun(a.EntityID)
		}
	}
}

// forgetRun drops every entry naming run id: it ended.
func (c *credCache) forgetRun(id string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for k := range c.m {
		if k.run == id {
			delete(c.m, k)
		}
	}
}
