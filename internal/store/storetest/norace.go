//go:build !race

package storetest

// raceEnabled reports whether the race detector is on (see race.go).
const raceEnabled = false
