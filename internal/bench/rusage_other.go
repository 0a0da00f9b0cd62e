//go:build !unix

package bench

import "time"

// processCPU is not measured on this platform.
func processCPU() time.Duration { return 0 }

func resetPeakRSS() {}

// peakRSS is not measured on this platform.
func peakRSS() int64 { return 0 }
