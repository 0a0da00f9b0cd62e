package sqlite

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// benchGoroutines are the concurrent clients of the benchmarks.
var benchGoroutines = []int{1, 8, 32}

// benchIssues is the number of issues the uncontended goroutines share
// out (at least 4 each), as clasp bench's default fixture.
const benchIssues = 1000

// BenchmarkCheckoutRelease measures checkout+release cycles through the
// store (each cycle two write transactions, each with its activity row), at
// 1, 8 and 32 goroutines, uncontended (each goroutine its own agent, run
// and issues) and contended (every goroutine a run of one agent, all on one
// issue: conflicts are counted, cycles/s counts successful cycles), with
// synchronous FULL and NORMAL. One op is one attempted cycle.
//
//	go test -run '^$' -bench CheckoutRelease -benchtime 2s ./internal/store/sqlite/
//
// BenchmarkRaw of internal/bench runs the same statements without the
// store's Go code.
func BenchmarkCheckoutRelease(b *testing.B) {
	for _, syncMode := range []string{"FULL", "NORMAL"} {
		for _, contended := range []bool{false, true} {
			mode := map[bool]string{false: "uncontended", true: "contended"}[contended]
			for _, n := range benchGoroutines {
				b.Run(fmt.Sprintf("sync=%s/%s/goroutines=%d", syncMode, mode, n), func(b *testing.B) {
					benchStore(b, syncMode, contended, n)
				})
			}
		}
	}
}

func benchStore(b *testing.B, syncMode string, contended bool, n int) {
	ctx := context.Background()
	s := openTest(b, Options{Synchronous: syncMode})
	co, err := s.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "Bench", IssuePrefix: "BENCH", Actor: board})
	if err != nil {
		b.Fatal(err)
	}
	newAgent := func(name string) *clasp.Agent {
		a, err := s.AgentCreate(ctx, &store.AgentCreateParams{CompanyID: co.ID, Name: name, Actor: board})
		if err != nil {
			b.Fatal(err)
		}
		return a
	}
	newRun := func(a *clasp.Agent) store.Actor {
		r, err := s.RunOpen(ctx, &store.RunOpenParams{AgentID: a.ID, LeaseTTL: time.Hour, Actor: agentOf(a, "")})
		if err != nil {
			b.Fatal(err)
		}
		return agentOf(a, r.ID)
	}
	newIssue := func() string {
		iss, err := s.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: co.ID, Title: "bench", Status: clasp.IssueTodo, Actor: board})
		if err != nil {
			b.Fatal(err)
		}
		return iss.ID
	}
	expected := []clasp.IssueStatus{clasp.IssueTodo}
	var conflicts atomic.Int64
	cycles := make([]func() error, n)
	shared, sharedAgent := "", (*clasp.Agent)(nil)
	if contended {
		shared, sharedAgent = newIssue(), newAgent("shared")
	}
	for g := range cycles {
		var actor store.Actor
		var issues []string
		if contended {
			actor, issues = newRun(sharedAgent), []string{shared}
		} else {
			actor = newRun(newAgent("agent-" + strconv.Itoa(g)))
			for range max(4, benchIssues/n) {
				issues = append(issues, newIssue())
			}
		}
		k := 0
		cycles[g] = func() error {
			ref := issues[k%len(issues)]
			k++
			_, err := s.IssueCheckout(ctx, &store.IssueCheckoutParams{Ref: ref, AgentID: actor.AgentID, ExpectedStatuses: expected, Actor: actor})
			if clasp.ErrorCode(err) == clasp.CodeCheckoutConflict {
				conflicts.Add(1)
				return nil
			}
			if err != nil {
				return err
			}
			_, err = s.IssueRelease(ctx, &store.IssueReleaseParams{Ref: ref, Actor: actor})
			return err
		}
	}
	frames := walFrames(b, s.d)
	w0 := s.d.WriteStats()
	cpu0 := cpuTime()
	runCycles(b, cycles)
	cpu := cpuTime() - cpu0
	ok := float64(int64(b.N) - conflicts.Load())
	w1 := s.d.WriteStats()
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
	b.ReportMetric(ok/b.Elapsed().Seconds(), "cycles/s")
	b.ReportMetric(float64(conflicts.Load())/float64(b.N), "conflicts/op")
	b.ReportMetric(float64(frames())/float64(b.N), "walframes/op")
	b.ReportMetric(float64(w1.Writes-w0.Writes)/float64(max(1, w1.Commits-w0.Commits)), "writes/commit")
}

// cpuTime is the process's CPU time so far (user + system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// walFrames stops the writer's automatic checkpoints, empties the WAL and
// returns a function that counts the WAL frames (one page each) written
// since: the pages the benchmark's commits dirtied.
func walFrames(b *testing.B, s *Driver) func() int64 {
	b.Helper()
	if _, err := s.w.Exec("PRAGMA wal_autocheckpoint = 0"); err != nil {
		b.Fatal(err)
	}
	if _, err := s.w.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		b.Fatal(err)
	}
	var page int64
	if err := s.w.QueryRow("PRAGMA page_size").Scan(&page); err != nil {
		b.Fatal(err)
	}
	size := func() int64 {
		fi, err := os.Stat(s.path + "-wal")
		if err != nil {
			b.Fatal(err)
		}
		return fi.Size()
	}
	start := size()
	return func() int64 {
		n := size() - start
		if start == 0 && n > 0 {
			n -= 32 // the WAL header
		}
		return n / (page + 24)
	}
}

// runCycles runs b.N calls spread over the goroutines, one goroutine per
// element of cycles, and fails the benchmark on the first error.
func runCycles(b *testing.B, cycles []func() error) {
	b.ReportAllocs()
	var (
		next    atomic.Int64
		errOnce sync.Once
		wg      sync.WaitGroup
	)
	b.ResetTimer()
	for _, cycle := range cycles {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := cycle(); err != nil {
					errOnce.Do(func() { b.Error(err) })
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
}
