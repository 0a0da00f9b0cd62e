package server

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestGCPercentFor: the heap may grow to GCHeapFloor while the live data
// is small, never past GCMaxPercent over it, and never less than Go's
// default of twice the live data.
func TestGCPercentFor(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, GCMaxPercent},
		{1 << 20, GCMaxPercent},         // 1 MiB: capped at 5 x live
		{GCHeapFloor / 5, GCMaxPercent}, // exactly 5 x live reaches the floor
		{GCHeapFloor / 4, 300},          // 16 MiB: 64 MiB is 4 x live
		{GCHeapFloor / 3, 200},          // the floor is 3 x live
		{GCHeapFloor / 2, gcMinPercent}, // the floor is 2 x live: Go's default
		{GCHeapFloor, gcMinPercent},     // above it: Go's default
		{8 * GCHeapFloor, gcMinPercent},
	} {
		if got := gcPercentFor(c.live); got != c.want {
			t.Errorf("gcPercentFor(%d) = %d, want %d", c.live, got, c.want)
		}
		if goal := float64(c.live) * (1 + float64(gcPercentFor(c.live))/100); c.live > 0 && goal > max(2*float64(c.live), GCHeapFloor) {
			t.Errorf("live %d: heap goal %.0f exceeds max(2 x live, GCHeapFloor)", c.live, goal)
		}
	}
}

// TestTuneGCSetsPercent: with GOGC unset, tuneGC sets GOGC to
// GCMaxPercent at once (the live heap is read after each collection).
func TestTuneGCSetsPercent(t *testing.T) {
	if os.Getenv("GOGC") != "" {
		t.Skip("GOGC is set: the server obeys it and tunes nothing")
	}
	tuneGC()
	got := debug.SetGCPercent(GCMaxPercent)
	debug.SetGCPercent(got)
	if got < gcMinPercent || got > GCMaxPercent {
		t.Fatalf("GOGC after tuneGC = %d, want %d..%d", got, gcMinPercent, GCMaxPercent)
	}
}
