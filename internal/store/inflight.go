package store

import (
	"context"
	"sync"
)

// Inflight queues the checkouts of one issue inside this process behind the
// one already running, so that they decide on the row it leaves: when N
// runs check out the same issue at once, one statement runs, then the
// others run theirs together on the committed result and refuse read-only,
// instead of N statements contending for the row (on PostgreSQL, each
// loser waiting in turn for the row's tuple lock, then running again). It
// only orders this process's own calls; the lock rule statement still
// decides, so calls through other processes or other replicas stay
// correct, merely not queued. The zero value is ready to use.
type Inflight struct {
	mu      sync.Mutex
	m       map[string]chan struct{}
	waiting int // callers blocked in Enter now
}

// Enter waits while a call for key is in flight in this process (entered
// and not yet done), then returns a done func that the caller must call
// when its own statement has ended, and whether it waited. A caller that
// waited runs without queueing others behind it (its done does nothing),
// so the waiters of one call run together. Error: ctx's, when ctx ends
// while waiting (done is nil then).
func (f *Inflight) Enter(ctx context.Context, key string) (done func(), waited bool, err error) {
	f.mu.Lock()
	ch, busy := f.m[key]
	if !busy {
		if f.m == nil {
			f.m = map[string]chan struct{}{}
		}
		ch = make(chan struct{})
		f.m[key] = ch
		f.mu.Unlock()
		return func() {
			f.mu.Lock()
			delete(f.m, key)
			f.mu.Unlock()
			close(ch)
		}, false, nil
	}
	f.waiting++
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.waiting--
		f.mu.Unlock()
	}()
	select {
	case <-ch:
		return func() {}, true, nil
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
}

// Waiting returns how many callers are blocked in Enter now.
func (f *Inflight) Waiting() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.waiting
}
