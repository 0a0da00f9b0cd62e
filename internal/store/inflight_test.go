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

// A call for a key waits for the one in flight, then runs (in a batch)
// without queueing a third behind it; another key never waits; a waiter
// whose context ends returns its error.
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
		done  func()
		batch *Batch
		err   error
	}
	got := make(chan entered, 2)
	for _, m := range []string{"w1", "w2"} {
		go func() {
			d, b, err := f.Enter(ctx, "a", m)
			got <- entered{d, b, err}
		}()
		for f.Waiting() < 1+slices.Index([]string{"w1", "w2"}, m) {
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
		e.done()
	}
	if batches[0] != batches[1] {
		t.Errorf("the two waiters of one call got different batches")
	}
	if m := batches[0].Members(); !slices.Equal(m, []string{"w1", "w2"}) {
		t.Errorf("batch members: got %q, want [w1 w2]", m)
	}
	// Nothing is in flight now: the next call runs at once and leads.
	d, b, err := f.Enter(ctx, "a", "lead2")
	if err != nil || b != nil {
		t.Fatalf("Enter after the waiters: got batch %v, %v, want nil, nil", b, err)
	}

	cctx, cancel := context.WithCancel(ctx)
	res := make(chan error, 1)
	go func() {
		_, _, err := f.Enter(cctx, "a", "gives up")
		res <- err
	}()
	for f.Waiting() < 1 {
		runtime.Gosched()
	}
	cancel()
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Errorf("waiter whose context ended: got %v, want context.Canceled", err)
	}
	d()
}

// The members of a batch share one read, run by the first that asks after
// the release, with every member's name; a second batch of the same key
// (callers that entered after the first was released) reads again; a
// failed read is every member's error.
func TestInflightShared(t *testing.T) {
	var f Inflight
	ctx := t.Context()
	var reads atomic.Int32
	var released atomic.Bool
	read := func(_ context.Context, members []string) ([]string, error) {
		if !released.Load() {
			t.Errorf("shared read ran before the call the batch waited for was done")
		}
		reads.Add(1)
		return slices.Clone(members), nil
	}

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
		for f.Waiting() < n {
			runtime.Gosched()
		}
		released.Store(true)
		done()
		wg.Wait()
		released.Store(false)
		return vals, errs
	}

	vals, errs := batch(5, read)
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

	if _, errs = batch(3, read); errors.Join(errs...) != nil {
		t.Fatalf("second batch: %v", errors.Join(errs...))
	}
	if n := reads.Load(); n != 2 {
		t.Errorf("reads after a second batch: got %d, want 2", n)
	}

	boom := errors.New("boom")
	_, errs = batch(3, func(context.Context, []string) ([]string, error) { return nil, boom })
	for i, err := range errs {
		if !errors.Is(err, boom) {
			t.Errorf("member %d of a batch whose read failed: got %v, want the read's error", i, err)
		}
	}
}
