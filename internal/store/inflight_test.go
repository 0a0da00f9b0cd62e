package store

import (
	"context"
	"errors"
	"runtime"
	"testing"
)

// A call for a key waits for the one in flight, then runs (waited true)
// without queueing a third behind it; another key never waits; a waiter
// whose context ends returns its error.
func TestInflight(t *testing.T) {
	var f Inflight
	ctx := t.Context()
	done, waited, err := f.Enter(ctx, "a")
	if err != nil || waited {
		t.Fatalf("first Enter: got waited %v, %v, want false, nil", waited, err)
	}
	if d, w, err := f.Enter(ctx, "b"); err != nil || w {
		t.Fatalf("Enter of another key: got waited %v, %v, want false, nil", w, err)
	} else {
		d()
	}

	type entered struct {
		done   func()
		waited bool
		err    error
	}
	got := make(chan entered, 2)
	for range 2 {
		go func() {
			d, w, err := f.Enter(ctx, "a")
			got <- entered{d, w, err}
		}()
	}
	for f.Waiting() < 2 {
		select {
		case e := <-got:
			t.Fatalf("Enter while a call is in flight returned before it was done: %+v", e)
		default:
			runtime.Gosched()
		}
	}
	done()
	for range 2 {
		e := <-got
		if e.err != nil || !e.waited {
			t.Fatalf("waiter: got waited %v, %v, want true, nil", e.waited, e.err)
		}
		e.done()
	}
	// Nothing is in flight now: the next call runs at once and leads.
	d, w, err := f.Enter(ctx, "a")
	if err != nil || w {
		t.Fatalf("Enter after the waiters: got waited %v, %v, want false, nil", w, err)
	}

	cctx, cancel := context.WithCancel(ctx)
	res := make(chan error, 1)
	go func() {
		_, _, err := f.Enter(cctx, "a")
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
