package store

import (
	"context"
	"sync"
)

// Inflight queues the checkouts of one issue inside this process behind the
// one already running, so that they decide on the row it leaves: when N
// runs check out the same issue at once, one statement runs, then the
// others (a Batch) are released together after it ended and share one read
// of the lock state, from which each refuses in Go (read-only)
// when the rule refuses it, instead of N statements contending for the row
// (on PostgreSQL, each loser waiting in turn for the row's tuple lock, then
// running again). It only orders this process's own calls; the lock rule
// statement still decides every write, so calls through other processes or
// other replicas stay correct, merely not queued. The zero value is ready
// to use.
type Inflight struct {
	mu      sync.Mutex
	m       map[string]*flight
	waiting int // callers blocked in Enter now
}

// CheckoutKey is the Inflight key of the checkouts of issue reference ref
// (a UUID or an identifier, as the checkout names it) in companyID.
func CheckoutKey(companyID, ref string) string { return companyID + "\x00" + ref }

// flight is the call in flight for one key and the batch waiting for it.
type flight struct {
	done  chan struct{} // closed when the call has ended
	batch *Batch        // nil until a caller waits
}

// Batch is the callers that waited for one call of a key: they entered
// while it was in flight and were released together when it ended. Its
// members are fixed at that release.
type Batch struct {
	members []string // what each caller passed to Enter, in order of arrival

	mu      sync.Mutex
	started bool
	ready   chan struct{} // closed when the shared read has ended
	val     any
	err     error
}

// Enter waits while a call for key is in flight in this process (entered
// and not yet done), then returns a done func that the caller must call
// when its own statement has ended, and the batch it waited in (nil when
// it did not wait). member (a checkout's run id) is recorded in that batch
// (Batch.Members). A caller that waited runs without queueing others
// behind it (its done does nothing), so the waiters of one call run
// together; a call entering after they were released leads the next
// batch. Error: ctx's, when ctx ends while waiting (done is nil then).
func (f *Inflight) Enter(ctx context.Context, key, member string) (done func(), b *Batch, err error) {
	f.mu.Lock()
	fl, busy := f.m[key]
	if !busy {
		if f.m == nil {
			f.m = map[string]*flight{}
		}
		fl = &flight{done: make(chan struct{})}
		f.m[key] = fl
		f.mu.Unlock()
		return func() {
			f.mu.Lock()
			delete(f.m, key)
			f.mu.Unlock()
			close(fl.done)
		}, nil, nil
	}
	if fl.batch == nil {
		fl.batch = &Batch{ready: make(chan struct{})}
	}
	fl.batch.members = append(fl.batch.members, member)
	f.waiting++
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.waiting--
		f.mu.Unlock()
	}()
	select {
	case <-fl.done:
		return func() {}, fl.batch, nil
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
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
// gets ctx's error). Every member calls it only after Enter returned b, so the read
// starts after the call the batch waited for ended and after every member
// began its own call (each entered before the release): a state it reads
// was committed at a moment inside every member's call, never before one
// began. An error of read is every member's.
func Shared[T any](ctx context.Context, b *Batch, read func(ctx context.Context, members []string) (T, error)) (T, error) {
	b.mu.Lock()
	first := !b.started
	b.started = true
	b.mu.Unlock()
	if first {
		v, err := read(context.WithoutCancel(ctx), b.members)
		b.val, b.err = v, err
		close(b.ready)
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
