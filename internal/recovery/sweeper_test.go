package recovery

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/metrics"
	"github.com/clasp-dev/clasp/internal/store"
	"github.com/clasp-dev/clasp/internal/store/sqlite"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type bundle struct {
	st    *store.DB
	clock *clock
	m     *metrics.Metrics
	log   *slog.Logger
}

func setup(t *testing.T) *bundle {
	t.Helper()
	clk := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	stDrv, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "clasp.db"), sqlite.Options{Now: clk.Now, Synchronous: "NORMAL"})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	st := store.New(stDrv)
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return &bundle{st: st, clock: clk, m: metrics.New(prometheus.NewRegistry()), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// heldIssue makes an issue held by a fresh running run with the given
// lease TTL; it returns the issue and the run.
func (b *bundle) heldIssue(t *testing.T, prefix string, ttl time.Duration) (*clasp.Issue, *clasp.Run) {
	t.Helper()
	ctx := context.Background()
	board := store.Actor{Type: clasp.ActorBoard}
	co, err := b.st.CompanyCreate(ctx, &store.CompanyCreateParams{Name: prefix, IssuePrefix: prefix, Actor: board})
	if err != nil {
		t.Fatal(err)
	}
	a, err := b.st.AgentCreate(ctx, &store.AgentCreateParams{CompanyID: co.ID, Name: "a", Actor: board})
	if err != nil {
		t.Fatal(err)
	}
	agent := store.Actor{Type: clasp.ActorAgent, AgentID: a.ID, CompanyID: co.ID}
	run, err := b.st.RunOpen(ctx, &store.RunOpenParams{AgentID: a.ID, InvocationSource: clasp.InvocationSelf, LeaseTTL: ttl, TokenHash: fmt.Sprintf("%x", sha256.Sum256([]byte(prefix))), Actor: agent})
	if err != nil {
		t.Fatal(err)
	}
	iss, err := b.st.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: co.ID, Title: "t", Status: clasp.IssueTodo, Actor: board})
	if err != nil {
		t.Fatal(err)
	}
	agent.RunID = run.ID
	iss, err = b.st.IssueCheckout(ctx, &store.IssueCheckoutParams{Ref: iss.ID, AgentID: a.ID, ExpectedStatuses: []clasp.IssueStatus{clasp.IssueTodo}, LeaseTTL: ttl, Actor: agent})
	if err != nil {
		t.Fatal(err)
	}
	return iss, run
}

// TestRunOnce is scenario S20 at the sweeper's level: an expired lease
// fails the run and frees its issue in one sweep; the next sweep clears
// nothing; a live holder (S22) is left alone.
func TestRunOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	short, shortRun := b.heldIssue(t, "SW", time.Minute)
	long, longRun := b.heldIssue(t, "LV", time.Hour)
	s := NewSweeper(b.st, Config{Logger: b.log, Metrics: b.m})

	res, err := s.RunOnce(ctx)
	if err != nil || res != (store.SweepResult{}) {
		t.Fatalf("first sweep = %+v, %v; want nothing to do", res, err)
	}
	b.clock.Advance(2 * time.Minute)
	res, err = s.RunOnce(ctx)
	if err != nil || res != (store.SweepResult{RunsExpired: 1, LocksCleared: 1}) {
		t.Fatalf("sweep after expiry = %+v, %v; want 1 run expired, 1 lock cleared", res, err)
	}
	run, err := b.st.RunGet(ctx, shortRun.ID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != clasp.RunFailed || run.ErrorCode == nil || *run.ErrorCode != clasp.RunErrorLeaseExpired {
		t.Errorf("expired run %+v; want failed, lease_expired", run)
	}
	iss, err := b.st.IssueGet(ctx, "", short.ID)
	if err != nil {
		t.Fatal(err)
	}
	if iss.CheckoutRunID != nil || iss.ExecutionRunID != nil {
		t.Errorf("issue still locked after sweep: %+v", iss)
	}
	res, err = s.RunOnce(ctx)
	if err != nil || res != (store.SweepResult{}) {
		t.Errorf("second sweep = %+v, %v; want nothing", res, err)
	}
	iss, err = b.st.IssueGet(ctx, "", long.ID)
	if err != nil {
		t.Fatal(err)
	}
	if iss.CheckoutRunID == nil || *iss.CheckoutRunID != longRun.ID {
		t.Errorf("live holder's issue touched: %+v", iss)
	}
	if got := counterValue(b.m.Sweeps); got != 3 {
		t.Errorf("sweeps metric %v, want 3", got)
	}
	if got := counterValue(b.m.SweepRunsExpired); got != 1 {
		t.Errorf("runs expired metric %v, want 1", got)
	}
	if got := counterValue(b.m.SweepLocksCleared); got != 1 {
		t.Errorf("locks cleared metric %v, want 1", got)
	}
}

// TestStartStop checks the loop: a sweep at once, then one per interval,
// and Stop waits for the goroutine (goleak checks it is gone).
func TestStartStop(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.heldIssue(t, "ST", time.Minute)
	b.clock.Advance(2 * time.Minute)
	s := NewSweeper(b.st, Config{Interval: time.Millisecond, Logger: b.log, Metrics: b.m})
	passes := make(chan store.SweepResult, 100)
	s.afterPass = func(res store.SweepResult, err error) {
		if err != nil {
			t.Errorf("sweep: %v", err)
		}
		select {
		case passes <- res:
		default:
		}
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err == nil {
		t.Error("second Start succeeded, want an error")
	}
	if first := <-passes; first != (store.SweepResult{RunsExpired: 1, LocksCleared: 1}) {
		t.Errorf("first pass %+v, want the expired run swept at once", first)
	}
	if second := <-passes; second != (store.SweepResult{}) {
		t.Errorf("second pass %+v, want nothing", second)
	}
	s.Stop()
	s.Stop() // idempotent
}

// cancelDuringSweep is the real store whose pass 2 first ends the
// sweeper's context, as Stop does when it lands in the middle of a pass.
type cancelDuringSweep struct {
	store.Store
	cancel context.CancelFunc
}

func (c cancelDuringSweep) SweepStaleLocks(ctx context.Context) (int, error) {
	c.cancel()
	return c.Store.SweepStaleLocks(ctx)
}

// TestStopDuringPass: a pass cut short by its context ending (Stop or the
// parent context) is no failure: it is neither logged as an error, counted
// as a sweep error, nor handed on as a pass, and the loop ends.
func TestStopDuringPass(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := NewSweeper(cancelDuringSweep{Store: b.st, cancel: cancel}, Config{Interval: time.Millisecond, Metrics: b.m,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelError}))})
	var passes []error
	s.afterPass = func(_ store.SweepResult, err error) { passes = append(passes, err) }
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	<-s.done // the loop ends by itself: its context ended during the first pass
	s.Stop()
	if len(passes) != 0 {
		t.Errorf("afterPass called %d times (%v), want none for a pass cut short", len(passes), passes)
	}
	if got := logs.String(); got != "" {
		t.Errorf("error logged for a stopped pass: %s", got)
	}
	if got := counterValue(b.m.SweepErrors); got != 0 {
		t.Errorf("sweep errors metric %v, want 0", got)
	}
	if got := counterValue(b.m.Sweeps); got != 1 {
		t.Errorf("sweeps metric %v, want 1 (the pass that was cut short)", got)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger's goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestStopWithoutStart and a cancelled parent context end cleanly.
func TestStopWithoutStart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	NewSweeper(b.st, Config{}).Stop()

	ctx, cancel := context.WithCancel(context.Background())
	s := NewSweeper(b.st, Config{Interval: time.Hour, Logger: b.log})
	ran := make(chan struct{}, 1)
	s.afterPass = func(store.SweepResult, error) {
		select {
		case ran <- struct{}{}:
		default:
		}
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	<-ran
	cancel()
	s.Stop()
}

// TestConcurrentSweepers is scenario S23 in small: two sweepers at the same
// moment clear each stale lock exactly once.
func TestConcurrentSweepers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 20
	for i := 0; i < n; i++ {
		b.heldIssue(t, "C"+string(rune('A'+i)), time.Minute)
	}
	b.clock.Advance(2 * time.Minute)
	s1 := NewSweeper(b.st, Config{Logger: b.log})
	s2 := NewSweeper(b.st, Config{Logger: b.log})
	var wg sync.WaitGroup
	results := make([]store.SweepResult, 2)
	for i, s := range []*Sweeper{s1, s2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.RunOnce(context.Background())
			if err != nil {
				t.Errorf("sweeper %d: %v", i, err)
			}
			results[i] = res
		}()
	}
	wg.Wait()
	if got := results[0].RunsExpired + results[1].RunsExpired; got != n {
		t.Errorf("runs expired %d in total, want %d", got, n)
	}
	if got := results[0].LocksCleared + results[1].LocksCleared; got != n {
		t.Errorf("locks cleared %d in total, want %d", got, n)
	}
}

// counterValue reads a counter.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

// TestDependencyPassAndNudge: with a real store (a DependencyWaker), the
// sweep's dependency pass sends a due dependency wake once (RULES.md D8),
// counts it and calls AfterWakes; Nudge runs the pass at once, without
// waiting for the interval.
func TestDependencyPassAndNudge(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	board := store.Actor{Type: clasp.ActorBoard}
	co, err := b.st.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "D", IssuePrefix: "DEP", Actor: board})
	if err != nil {
		t.Fatal(err)
	}
	a, err := b.st.AgentCreate(ctx, &store.AgentCreateParams{CompanyID: co.ID, Name: "a", Actor: board})
	if err != nil {
		t.Fatal(err)
	}
	newIssue := func(blockers ...string) *clasp.Issue {
		iss, err := b.st.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: co.ID, Title: "t", Status: clasp.IssueTodo,
			AssigneeAgentID: a.ID, BlockedByIssueIDs: blockers, Actor: board})
		if err != nil {
			t.Fatal(err)
		}
		return iss
	}
	done := func(iss *clasp.Issue) {
		st := clasp.IssueDone
		if _, err := b.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: iss.ID, Status: &st, Actor: board}); err != nil {
			t.Fatal(err)
		}
	}
	blocker := newIssue()
	newIssue(blocker.ID)
	var woke atomic.Int64
	s := NewSweeper(b.st, Config{Interval: time.Hour, Logger: b.log, Metrics: b.m, AfterWakes: func(n int) { woke.Add(int64(n)) }})
	done(blocker)
	res, err := s.RunOnce(ctx)
	if err != nil || res.DependencyWakes != 1 {
		t.Fatalf("sweep: %+v, %v; want one dependency wake", res, err)
	}
	if res, _ := s.RunOnce(ctx); res.DependencyWakes != 0 {
		t.Errorf("second sweep: %d dependency wakes, want 0", res.DependencyWakes)
	}
	if got := counterValue(b.m.SweepDependencyWakes); got != 1 {
		t.Errorf("metric: %v, want 1", got)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	b2 := newIssue()
	newIssue(b2.ID)
	done(b2)
	s.Nudge()
	s.Nudge() // absorbed
	deadline := time.Now().Add(5 * time.Second)
	for woke.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := woke.Load(); got != 2 {
		t.Errorf("AfterWakes total: %d, want 2 (one per due wake)", got)
	}
}
