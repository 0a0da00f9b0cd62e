package store

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// waitUntil yields until cond holds.
func waitUntil(cond func() bool) {
	for !cond() {
		runtime.Gosched()
	}
}

// noRead is a shared read that answers the members.
func noRead(_ context.Context, members []string) ([]string, error) { return slices.Clone(members), nil }

// A call for a key waits for the one in flight, then is released in a
// batch with the other waiters; another key never waits; once the batch's
// read has ended the key is idle and the next call leads; a waiter whose
// context ends returns its error and, alone in its batch, leaves the key
// idle at the release.
func TestInflight(t *testing.T) {
	var f Inflight
	ctx := t.Context()
	done, b, err := f.Enter(ctx, "a", "lead")
	if err != nil || b != nil {
		t.Fatalf("first Enter: got batch %v, %v, want nil, nil", b, err)
	}
	if d, b, err := f.Enter(ctx, "b", "other"); err != nil || b != nil {
		t.Fatalf("Enter of another key: got batch %v, %v, want nil, nil", b, err)
	} else {
		d()
	}

	type entered struct {
		batch *Batch
		err   error
	}
	got := make(chan entered, 2)
	for i, m := range []string{"w1", "w2"} {
		go func() {
			d, b, err := f.Enter(ctx, "a", m)
			if d != nil {
				d()
			}
			got <- entered{b, err}
		}()
		for f.Waiting() < i+1 {
			select {
			case e := <-got:
				t.Fatalf("Enter while a call is in flight returned before it was done: %+v", e)
			default:
				runtime.Gosched()
			}
		}
	}
	done()
	var batches []*Batch
	for range 2 {
		e := <-got
		if e.err != nil || e.batch == nil {
			t.Fatalf("waiter: got batch %v, %v, want a batch, nil", e.batch, e.err)
		}
		batches = append(batches, e.batch)
	}
	if batches[0] != batches[1] {
		t.Fatalf("the two waiters of one call got different batches")
	}
	if m := batches[0].Members(); !slices.Equal(m, []string{"w1", "w2"}) {
		t.Errorf("batch members: got %q, want [w1 w2]", m)
	}
	for _, b := range batches {
		if _, err := Shared(ctx, b, noRead); err != nil {
			t.Fatalf("shared read: %v", err)
		}
	}
	// The batch's read has ended and nobody waits: the next call leads.
	d, b, err := f.Enter(ctx, "a", "lead2")
	if err != nil || b != nil {
		t.Fatalf("Enter after the batch's read: got batch %v, %v, want nil, nil", b, err)
	}

	cctx, cancel := context.WithCancel(ctx)
	res := make(chan error, 1)
	go func() {
		_, _, err := f.Enter(cctx, "a", "gives up")
		res <- err
	}()
	waitUntil(func() bool { return f.Waiting() == 1 })
	cancel()
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Errorf("waiter whose context ended: got %v, want context.Canceled", err)
	}
	d()
	if d, b, err := f.Enter(ctx, "a", "lead3"); err != nil || b != nil {
		t.Fatalf("Enter after a batch whose only member gave up: got batch %v, %v, want nil, nil", b, err)
	} else {
		d()
	}
}

// The members of a batch share one read, run by the first that asks after
// the release, with every member's name; calls that arrive while that read
// is in flight form the next batch, released only when it has ended, and
// read again; a failed read is every member's error.
func TestInflightShared(t *testing.T) {
	var f Inflight
	ctx := t.Context()
	var reads atomic.Int32

	// batch enters n members behind a leader (or behind hold, when set),
	// runs read through Shared in each once released, and returns what
	// each got.
	batch := func(n int, read func(context.Context, []string) ([]string, error)) ([][]string, []error) {
		done, _, err := f.Enter(ctx, "k", "lead")
		if err != nil {
			t.Fatal(err)
		}
		vals, errs := make([][]string, n), make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				_, b, err := f.Enter(ctx, "k", string(rune('a'+i)))
				if err != nil || b == nil {
					errs[i] = errors.Join(err, errors.New("not in a batch"))
					return
				}
				vals[i], errs[i] = Shared(ctx, b, read)
			})
		}
		waitUntil(func() bool { return f.Waiting() == n })
		done()
		wg.Wait()
		return vals, errs
	}

	vals, errs := batch(5, func(ctx context.Context, m []string) ([]string, error) { reads.Add(1); return noRead(ctx, m) })
	for i := range 5 {
		if errs[i] != nil {
			t.Fatalf("member %d: %v", i, errs[i])
		}
		slices.Sort(vals[i])
		if !slices.Equal(vals[i], []string{"a", "b", "c", "d", "e"}) {
			t.Errorf("member %d read members %q, want [a b c d e]", i, vals[i])
		}
	}
	if n := reads.Load(); n != 1 {
		t.Errorf("reads for one batch of 5: got %d, want 1", n)
	}

	// Calls arriving during the first batch's read wait for that read to
	// end, then read on their own.
	inRead, endRead := make(chan struct{}), make(chan struct{})
	var second sync.WaitGroup
	secondVals := make([][]string, 3)
	var secondReadEarly atomic.Bool
	readEnded := atomic.Bool{}
	slow := func(ctx context.Context, m []string) ([]string, error) {
		close(inRead)
		<-endRead
		readEnded.Store(true)
		return noRead(ctx, m)
	}
	go func() {
		<-inRead
		for i := range 3 {
			second.Go(func() {
				_, b, err := f.Enter(ctx, "k", string(rune('x'+i)))
				if err != nil || b == nil {
					t.Errorf("second batch member %d: got batch %v, %v, want a batch", i, b, err)
					return
				}
				secondVals[i], _ = Shared(ctx, b, func(ctx context.Context, m []string) ([]string, error) {
					if !readEnded.Load() {
						secondReadEarly.Store(true)
					}
					return noRead(ctx, m)
				})
			})
		}
		waitUntil(func() bool { return f.Waiting() == 3 })
		close(endRead)
	}()
	if _, errs = batch(2, slow); errors.Join(errs...) != nil {
		t.Fatalf("first batch: %v", errors.Join(errs...))
	}
	second.Wait()
	if secondReadEarly.Load() {
		t.Errorf("the batch that arrived during a read read before that read ended")
	}
	for i, v := range secondVals {
		slices.Sort(v)
		if !slices.Equal(v, []string{"x", "y", "z"}) {
			t.Errorf("second batch member %d read members %q, want [x y z]", i, v)
		}
	}

	boom := errors.New("boom")
	_, errs = batch(3, func(context.Context, []string) ([]string, error) { return nil, boom })
	for i, err := range errs {
		if !errors.Is(err, boom) {
			t.Errorf("member %d of a batch whose read failed: got %v, want the read's error", i, err)
		}
	}
	if d, b, err := f.Enter(ctx, "k", "last"); err != nil || b != nil {
		t.Errorf("Enter after all batches: got batch %v, %v, want nil, nil (the key idle)", b, err)
	} else {
		d()
	}
}
