package bench

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkRaw runs the raw limit's uncontended checkout+release cycles
// (raw.go: the store's own statements straight through the driver, none
// of its Go code) at 1, 8, 32 and 64 goroutines, each an agent with its
// run and four issues: on SQLite with synchronous FULL and NORMAL, and on
// PostgreSQL (a fresh schema of CLASP_TEST_POSTGRES_URL; left out without
// it). It is the floor the stores' BenchmarkCheckoutRelease is compared
// with (store ns/op divided by raw ns/op). One op is one cycle.
//
//	go test -run '^$' -bench Raw -benchtime 2s ./internal/bench/
func BenchmarkRaw(b *testing.B) {
	url := os.Getenv("CLASP_TEST_POSTGRES_URL")
	for _, target := range []string{"sqlite-full", "sqlite-normal", "postgres"} {
		if target == "postgres" && url == "" {
			continue
		}
		for _, n := range []int{1, 8, 32, 64} {
			b.Run(fmt.Sprintf("%s/uncontended/goroutines=%d", target, n), func(b *testing.B) {
				ctx := context.Background()
				var r *rawTarget
				if target == "postgres" {
					pg, drop, err := newPostgresRaw(ctx, url, nil, n, 4*n+1)
					if err != nil {
						b.Fatal(err)
					}
					defer drop()
					r = pg
				} else {
					lite, err := newSQLiteRaw(ctx, b.TempDir(), target[len("sqlite-"):], n, 4*n+1)
					if err != nil {
						b.Fatal(err)
					}
					r = lite
				}
				if err := r.open(ctx); err != nil {
					b.Fatal(err)
				}
				defer r.close()
				benchRawCycles(b, r)
			})
		}
	}
}

// benchRawCycles runs b.N checkout+release cycles of r spread over one
// goroutine per agent of its fixture, each going round its own issues,
// and fails the benchmark on the first error.
func benchRawCycles(b *testing.B, r *rawTarget) {
	b.ReportAllocs()
	var (
		next    atomic.Int64
		errOnce sync.Once
		wg      sync.WaitGroup
	)
	ctx := context.Background()
	b.ResetTimer()
	for _, steps := range r.steps {
		wg.Go(func() {
			for k := 0; next.Add(1) <= int64(b.N); k++ {
				s := steps[k%len(steps)]
				err := r.checkout(ctx, s)
				if err == nil {
					err = r.release(ctx, s)
				}
				if err != nil {
					errOnce.Do(func() { b.Error(err) })
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
}
