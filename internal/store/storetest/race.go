//go:build race

package storetest

// raceEnabled reports whether the race detector is on; it slows the
// database work of the concurrent tests tenfold, so they scale down (see
// scale).
const raceEnabled = true
