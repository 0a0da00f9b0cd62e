// Package recovery holds the sweeper (RULES.md, "The sweeper"): the background loop
// that fails running runs whose lease expired (pass 1) and then clears the
// locks of issues whose referenced runs are all dead (pass 2), and, when
// its store has them, sends the dependency wakes that are due (the
// dependency pass, RULES.md D8; also at once on Nudge).
//
// Both passes are guarded single statements inside the store
// (Store.SweepExpiredRuns, SweepStaleLocks), so any number of sweepers,
// on any number of replicas, may run at once. Only the server wiring
// (internal/server) imports this package.
package recovery

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/clasp-dev/clasp/internal/metrics"
	"github.com/clasp-dev/clasp/internal/store"
)

// DefaultInterval is the time between sweeps when Config.Interval is zero
// (clasp serve --sweep-interval's default).
const DefaultInterval = 10 * time.Second

// Config configures a Sweeper.
type Config struct {
	// Interval is the time between the end of one sweep and the next.
	// Default 10 s.
	Interval time.Duration
	// Logger receives a line per sweep that changed something, and errors.
	// Default slog.Default().
	Logger *slog.Logger
	// Metrics, when not nil, counts sweeps, expired runs, cleared locks
	// and dependency wakes.
	Metrics *metrics.Metrics
	// AfterWakes, when not nil, is called with the number of dependency
	// wakes a dependency pass sent, when it sent some (the server nudges
	// its heartbeat scheduler with it, so the queued runs start at once).
	AfterWakes func(n int)
}

// DependencyWaker is the optional part of a sweeper's store that sends
// the due dependency wakes (store.HeartbeatStore.DependencyWakesDeliver,
// RULES.md D8): at most limit candidates a call; it returns how many
// wakes it sent. Safe to run concurrently on any number of replicas.
type DependencyWaker interface {
	DependencyWakesDeliver(ctx context.Context, limit int) (int, error)
}

// dependencyBatch is the most dependency wake candidates of each kind one
// call reads.
const dependencyBatch = 500

// Store is what the sweeper needs of the store: its two passes, each one
// guarded statement (see store.Store's methods of the same names).
type Store interface {
	// SweepExpiredRuns is pass 1: running runs whose lease expired become
	// failed (lease_expired); it returns how many.
	SweepExpiredRuns(ctx context.Context) (int, error)
	// SweepStaleLocks is pass 2: it clears the locks of issues whose
	// referenced runs are all dead, returning how many issues it cleared.
	SweepStaleLocks(ctx context.Context) (int, error)
}

// Sweeper runs the two sweeper passes at start and then every Interval.
// Build it with NewSweeper; Start and Stop it once.
type Sweeper struct {
	st  Store
	cfg Config

	// nudge asks the loop for a dependency pass now (Nudge); one pending
	// request is enough.
	nudge chan struct{}

	mu      sync.Mutex
	started bool
	cancel  context.CancelFunc
	done    chan struct{}

	// afterPass, when set (tests only), is called after every pass of the
	// loop that ran to its end, not after one cut short by Stop.
	afterPass func(store.SweepResult, error)
}

// NewSweeper returns a sweeper over st. It panics if st is nil.
func NewSweeper(st Store, cfg Config) *Sweeper {
	if st == nil {
		panic("recovery.NewSweeper: store is nil")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Sweeper{st: st, cfg: cfg, nudge: make(chan struct{}, 1)}
}

// Nudge asks the running sweeper for a dependency pass at once (the HTTP
// layer calls it after a write that may have made a dependency wake due).
// It never blocks: a request already pending absorbs it, and a sweeper
// not started runs its pass at its next sweep.
func (s *Sweeper) Nudge() {
	select {
	case s.nudge <- struct{}{}:
	default:
	}
}

// Start starts the sweeper's goroutine: one sweep at once, then one every
// Interval, until Stop is called or ctx ends. It returns an error if the
// sweeper was already started.
func (s *Sweeper) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("recovery: sweeper already started")
	}
	s.started = true
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go s.loop(ctx, s.done)
	return nil
}

// Stop stops the goroutine and waits for it (and for a sweep in progress,
// which sees its context cancelled). It does nothing if the sweeper was
// never started, and may be called more than once.
func (s *Sweeper) Stop() {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

// loop sweeps at once, then every Interval, until ctx ends.
func (s *Sweeper) loop(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.nudge:
			if _, err := s.DependencyPass(ctx); err != nil && ctx.Err() == nil {
				s.cfg.Logger.Error("dependency wakes failed", "err", err)
			}
			continue
		case <-t.C:
		}
		res, err := s.RunOnce(ctx)
		if ctx.Err() != nil {
			// Stopped during the pass: the pass was cut short by Stop (or
			// the parent context), which is neither a failure nor a pass.
			return
		}
		if err != nil {
			s.cfg.Logger.Error("sweep failed", "err", err)
		}
		if s.afterPass != nil {
			s.afterPass(res, err)
		}
		t.Reset(s.cfg.Interval)
	}
}

// RunOnce runs one sweep: pass 1 (store.SweepExpiredRuns: running runs whose
// lease expired become failed, lease_expired) and then pass 2
// (store.SweepStaleLocks: locks that name only dead runs are cleared, one
// issue.stale_lock_cleared each). Pass 2 runs even if pass 1 failed. It
// logs the counts when they are not zero and returns what changed; the
// error joins the failures of both passes. A sweep cut short because ctx
// ended still returns its error, but is not counted as a sweep error in
// the metrics: the caller stopped it, the store did not fail.
func (s *Sweeper) RunOnce(ctx context.Context) (store.SweepResult, error) {
	var res store.SweepResult
	expired, err1 := s.st.SweepExpiredRuns(ctx)
	res.RunsExpired = expired
	cleared, err2 := s.st.SweepStaleLocks(ctx)
	res.LocksCleared = cleared
	wakes, err3 := s.DependencyPass(ctx)
	res.DependencyWakes = wakes
	err := errors.Join(err1, err2, err3)
	if m := s.cfg.Metrics; m != nil {
		m.Sweeps.Inc()
		if err != nil && ctx.Err() == nil {
			m.SweepErrors.Inc()
		}
		m.SweepRunsExpired.Add(float64(res.RunsExpired))
		m.SweepLocksCleared.Add(float64(res.LocksCleared))
	}
	if res.RunsExpired > 0 || res.LocksCleared > 0 {
		s.cfg.Logger.Info("sweep", "runsExpired", res.RunsExpired, "locksCleared", res.LocksCleared)
	}
	return res, err
}

// DependencyPass sends the dependency wakes that are due (RULES.md D8),
// when the store is a DependencyWaker (else it does nothing), in batches
// while a batch sent some and found a full batch's worth. It counts them
// in the metrics, logs them, calls Config.AfterWakes when it sent any,
// and returns how many it sent.
func (s *Sweeper) DependencyPass(ctx context.Context) (int, error) {
	dw, ok := s.st.(DependencyWaker)
	if !ok {
		return 0, nil
	}
	total := 0
	for {
		n, err := dw.DependencyWakesDeliver(ctx, dependencyBatch)
		total += n
		if err != nil || n < dependencyBatch {
			if total > 0 {
				if m := s.cfg.Metrics; m != nil {
					m.SweepDependencyWakes.Add(float64(total))
				}
				s.cfg.Logger.Info("dependency wakes", "sent", total)
				if s.cfg.AfterWakes != nil {
					s.cfg.AfterWakes(total)
				}
			}
			return total, err
		}
	}
}
