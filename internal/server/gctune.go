package server

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// The garbage collector's pacing of a server process.
//
// Go's default (GOGC=100) starts a collection when the heap has grown by
// the live data since the last one: a server whose live data is a few MiB
// (a fleet of 32 agents cycling checkouts: about 6 MiB) then collects
// several times a second, and each collection's marking, assists and
// wake-ups of idle processors cost it a tenth of its CPU per request
// (measured: BENCHMARKS.md, "The server's CPU per HTTP request: garbage
// collection"). A small heap can afford to grow further: the server lets
// the heap grow to GCHeapFloor before collecting, but to no more than
// 1 + GCMaxPercent/100 times the live data, and never less than Go's
// default (twice the live data). So the heap holds at most GCHeapFloor
// more than under GOGC=100, and a server whose live data is above
// GCHeapFloor/2 is paced exactly as by default.
//
// A GOGC environment variable, when set, is obeyed instead and nothing is
// tuned. GOMEMLIMIT, when set, still caps the heap as Go documents.
const (
	// GCHeapFloor is the heap size up to which a collection is put off
	// while the live data is small.
	GCHeapFloor = 64 << 20
	// GCMaxPercent is the largest GOGC the server sets.
	GCMaxPercent = 400
	// gcMinPercent is Go's default, the smallest GOGC the server sets.
	gcMinPercent = 100
)

// gcPercentFor returns the GOGC for live bytes of live data: enough for
// the heap to reach GCHeapFloor before the next collection, within
// [100, GCMaxPercent].
func gcPercentFor(live uint64) int {
	if live == 0 {
		return GCMaxPercent
	}
	if live >= GCHeapFloor/2 {
		return gcMinPercent
	}
	p := (GCHeapFloor - live) * 100 / live // live < GCHeapFloor/2: no wrap
	if p >= GCMaxPercent {
		return GCMaxPercent
	}
	return int(max(p, gcMinPercent)) // #nosec G115 -- p is in [100, 400)
}

var gcTuneOnce sync.Once

// tuneGC installs, once per process and only when GOGC is unset, the
// pacing described above: after every collection the live heap is read
// (runtime/metrics /gc/heap/live:bytes) and GOGC set from it
// (gcPercentFor) when it changed. It starts at GCMaxPercent, as for an
// empty heap.
func tuneGC() {
	gcTuneOnce.Do(func() {
		if os.Getenv("GOGC") != "" {
			return
		}
		t := &gcTuner{sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
		t.set(GCMaxPercent)
		t.arm()
	})
}

// gcTuner re-sets GOGC after each collection. Its methods run on the
// runtime's finalizer goroutine, one at a time.
type gcTuner struct {
	sample  []metrics.Sample
	percent int
}

// gcSentinel is an object that nothing references, so the collection
// after its allocation finalizes it: its finalizer marks the end of a
// collection. It holds a pointer so that it is not a tiny allocation,
// which might share a block and never be finalized alone.
type gcSentinel struct {
	_ *gcTuner
	_ [2]uint64
}

// arm allocates the sentinel of the next collection.
func (t *gcTuner) arm() {
	runtime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) {
		metrics.Read(t.sample)
		if v := t.sample[0].Value; v.Kind() == metrics.KindUint64 {
			t.set(gcPercentFor(v.Uint64()))
		}
		t.arm()
	})
}

// set sets GOGC to p unless it already is p.
func (t *gcTuner) set(p int) {
	if p != t.percent {
		debug.SetGCPercent(p)
		t.percent = p
	}
}
