package postgres

import (
	"testing"
	"time"
)

// TestNextListenWait checks the listener's reconnect backoff: failed
// attempts double the wait up to the cap, and a connection that got as far
// as LISTEN starts the backoff again, so a loss after long service is
// retried after the first wait, not the cap.
func TestNextListenWait(t *testing.T) {
	var got []time.Duration
	wait := time.Duration(0)
	for _, listened := range []bool{false, false, false, false, false, false, false, false, true, false} {
		wait = nextListenWait(wait, listened)
		got = append(got, wait)
	}
	want := []time.Duration{
		listenRetryFirst, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
		1600 * time.Millisecond, 3200 * time.Millisecond, listenRetryMax, listenRetryMax,
		listenRetryFirst, 200 * time.Millisecond,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d waits, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("wait %d: got %v, want %v (all: %v)", i, got[i], want[i], got)
		}
	}
}
