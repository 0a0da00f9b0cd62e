package postgres

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// benchGoroutines are the concurrent clients of the benchmarks; each gets a
// connection of its own (the pool has as many).
var benchGoroutines = []int{1, 8, 32, 64}

var board = store.Actor{Type: clasp.ActorBoard}

func agentOf(a *clasp.Agent, runID string) store.Actor {
	return store.Actor{Type: clasp.ActorAgent, AgentID: a.ID, CompanyID: a.CompanyID, RunID: runID}
}

// BenchmarkCheckoutRelease measures checkout+release cycles through the
// store (each cycle two lock rules, each one statement and one round trip
// with its activity rows, committed), at 1, 8, 32 and
// 64 goroutines, uncontended (each goroutine its own agent, run and
// issues) and contended (every goroutine a run of one agent, all on one
// issue: conflicts are counted, cycles/s counts successful cycles). One op
// is one attempted cycle. Needs CLASP_TEST_POSTGRES_URL.
//
//	go test -run '^$' -bench CheckoutRelease ./internal/store/postgres/
//
// BenchmarkRaw of internal/bench runs the same statements without the
// store's Go code.
func BenchmarkCheckoutRelease(b *testing.B) {
	for _, contended := range []bool{false, true} {
		mode := map[bool]string{false: "uncontended", true: "contended"}[contended]
		for _, n := range benchGoroutines {
			b.Run(fmt.Sprintf("%s/goroutines=%d", mode, n), func(b *testing.B) { benchStore(b, contended, n) })
		}
	}
}

// benchEnv is a store in a fresh schema with a company and helpers.
type benchEnv struct {
	s  *testStore
	co *clasp.Company
}

func newBenchEnv(b *testing.B, conns int) *benchEnv {
	b.Helper()
	s := openTest(b, Options{MaxConns: int32(max(conns, 4))})
	co, err := s.CompanyCreate(context.Background(), &store.CompanyCreateParams{Name: "Bench", IssuePrefix: "BENCH", Actor: board})
	if err != nil {
		b.Fatal(err)
	}
	return &benchEnv{s: s, co: co}
}

func (e *benchEnv) agent(b testing.TB, name string) *clasp.Agent {
	a, err := e.s.AgentCreate(context.Background(), &store.AgentCreateParams{CompanyID: e.co.ID, Name: name, Actor: board})
	if err != nil {
		b.Fatal(err)
	}
	return a
}

func (e *benchEnv) run(b testing.TB, a *clasp.Agent) store.Actor {
	r, err := e.s.RunOpen(context.Background(), &store.RunOpenParams{AgentID: a.ID, LeaseTTL: time.Hour, Actor: agentOf(a, "")})
	if err != nil {
		b.Fatal(err)
	}
	return agentOf(a, r.ID)
}

func (e *benchEnv) issue(b *testing.B) string {
	iss, err := e.s.IssueCreate(context.Background(), &store.IssueCreateParams{CompanyID: e.co.ID, Title: "bench", Status: clasp.IssueTodo, Actor: board})
	if err != nil {
		b.Fatal(err)
	}
	return iss.ID
}

func benchStore(b *testing.B, contended bool, n int) {
	ctx := context.Background()
	e := newBenchEnv(b, n)
	expected := []clasp.IssueStatus{clasp.IssueTodo}
	var conflicts atomic.Int64
	cycles := make([]func() error, n)
	shared, sharedAgent := "", (*clasp.Agent)(nil)
	if contended {
		shared, sharedAgent = e.issue(b), e.agent(b, "shared")
	}
	for g := range cycles {
		var actor store.Actor
		var issues []string
		if contended {
			actor, issues = e.run(b, sharedAgent), []string{shared}
		} else {
			actor = e.run(b, e.agent(b, "agent-"+strconv.Itoa(g)))
			issues = []string{e.issue(b), e.issue(b), e.issue(b), e.issue(b)}
		}
		k := 0
		cycles[g] = func() error {
			ref := issues[k%len(issues)]
			k++
			_, err := e.s.IssueCheckout(ctx, &store.IssueCheckoutParams{Ref: ref, AgentID: actor.AgentID, ExpectedStatuses: expected, Actor: actor})
			if clasp.ErrorCode(err) == clasp.CodeCheckoutConflict {
				conflicts.Add(1)
				return nil
			}
			if err != nil {
				return err
			}
			_, err = e.s.IssueRelease(ctx, &store.IssueReleaseParams{Ref: ref, Actor: actor})
			return err
		}
	}
	runCycles(b, cycles)
	ok := float64(int64(b.N) - conflicts.Load())
	b.ReportMetric(ok/b.Elapsed().Seconds(), "cycles/s")
	b.ReportMetric(float64(conflicts.Load())/float64(b.N), "conflicts/op")
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
