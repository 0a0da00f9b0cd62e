package store

import (
	"context"
	"errors"
	"sync"
)

// errReadPanicked is the other members' error when a batch's read panicked.
var errReadPanicked = errors.New("the shared read of a batch of waiting calls panicked")

// Inflight queues the checkouts of one issue inside this process behind the
// one already running, so that they decide on the row it leaves: when N
// runs check out the same issue at once, one statement runs, then the
// others (a Batch) are released together after it ended and share one read
// of the lock state (Shared), from which each refuses in Go
// (read-only) when the rule refuses it, instead of N statements contending
// for the row (on PostgreSQL, each loser waiting in turn for the row's
// tuple lock, then running again). Calls that arrive while a batch's read
// is in flight form the next batch, released when that read has ended, so
// a key has at most one statement or read of this queue in flight and
// every caller waits for at most two. Members whose answer the read does
// not settle run their statements without queueing. It only orders this
// process's own calls; the lock rule statement still decides every write,
// so calls through other processes or other replicas stay correct, merely
// not queued. The zero value is ready to use.
type Inflight struct {
	mu      sync.Mutex
	m       map[string]*flight
	waiting int // callers blocked in Enter now
}

// CheckoutKey is the Inflight key of the checkouts of issue reference ref
// (a UUID or an identifier, as the checkout names it) in companyID.
func CheckoutKey(companyID, ref string) string { return companyID + "\x00" + ref }

// flight is what is in flight for one key (the leader's statement, then
// the shared reads of the batches behind it, one after the other) and the
// batch waiting for it (next, nil until a caller waits).
type flight struct {
	key  string
	next *Batch
}

// Batch is the callers that waited for one call or read of a key: they
// entered while it was in flight and were released together when it
// ended. Its members are fixed at that release.
type Batch struct {
	f  *Inflight
	fl *flight

	members  []string      // what each caller passed to Enter, in order of arrival
	live     int           // members still waiting, or released (not given up)
	released chan struct{} // closed at the release
	let      bool          // released (under f.mu)

	mu      sync.Mutex
	started bool
	ready   chan struct{} // closed when the shared read has ended
	val     any
	err     error
}

// Enter waits while a call or a shared read for key is in flight in this
// process (entered and not yet done), then returns a done func that the
// caller must call when its own statement has ended, and the batch it
// waited in (nil when it did not wait: it leads, and the calls that
// arrive until its done wait for it). member (a checkout's run id) is
// recorded in that batch (Batch.Members). A caller given a batch must call
// Shared with it next (the batch's read lets the next batch go); its done
// does nothing, so the members of one batch run together. Error: ctx's,
// when ctx ends while waiting (done and the batch are nil then).
func (f *Inflight) Enter(ctx context.Context, key, member string) (done func(), b *Batch, err error) {
	f.mu.Lock()
	fl, busy := f.m[key]
	if !busy {
		if f.m == nil {
			f.m = map[string]*flight{}
		}
		fl = &flight{key: key}
		f.m[key] = fl
		f.mu.Unlock()
		return func() { f.handOff(fl) }, nil, nil
	}
	b = fl.next
	if b == nil {
		b = &Batch{f: f, fl: fl, released: make(chan struct{}), ready: make(chan struct{})}
		fl.next = b
	}
	b.members = append(b.members, member)
	b.live++
	f.waiting++
	f.mu.Unlock()
	select {
	case <-b.released:
	case <-ctx.Done():
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waiting--
	if !b.let { // gave up before the release
		b.live--
		return nil, nil, ctx.Err()
	}
	return func() {}, b, nil // released (also when ctx ended at the same moment)
}

// handOff ends what was in flight for fl's key: the batch waiting for it
// is released, and its read is now in flight; with no batch (or one whose
// members all gave up) the key is idle again.
func (f *Inflight) handOff(fl *flight) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := fl.next
	fl.next = nil
	if b == nil || b.live == 0 {
		delete(f.m, fl.key)
		return
	}
	b.let = true
	close(b.released)
}

// Waiting returns how many callers are blocked in Enter now.
func (f *Inflight) Waiting() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.waiting
}

// Members returns what the batch's callers passed to Enter (a caller whose
// context ended while waiting included), in order of arrival. The slice is
// fixed once the batch is released; the caller must not modify it.
func (b *Batch) Members() []string { return b.members }

// Shared returns the result of read, run once for the whole of batch b by
// the first member that asks, with b's members and that member's ctx
// without its cancellation (so that a member giving up never fails the
// others; read must be bounded by itself, as a statement with a timeout
// is); the others wait for that result (a member whose own ctx ends first
// gets ctx's error). When read has returned, the next batch of the key is
// released. Every member calls it only after Enter returned b, so the read
// starts after what the batch waited for ended and after every member
// began its own call (each entered before the release): a state it reads
// was committed at a moment inside every member's call, never before one
// began. An error of read is every member's.
func Shared[T any](ctx context.Context, b *Batch, read func(ctx context.Context, members []string) (T, error)) (T, error) {
	b.mu.Lock()
	first := !b.started
	b.started = true
	b.mu.Unlock()
	if first {
		defer b.f.handOff(b.fl)
		defer close(b.ready)
		b.err = errReadPanicked // until read returns
		v, err := read(context.WithoutCancel(ctx), b.members)
		b.val, b.err = v, err
		return v, err
	}
	select {
	case <-b.ready:
		if b.err != nil {
			var zero T
			return zero, b.err
		}
		return b.val.(T), nil
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}
