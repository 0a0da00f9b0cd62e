// Package metrics defines the Prometheus metrics of the clasp server
// (served at /metrics): checkouts by outcome, checkout conflicts by reason, lock
// adoptions, sweeper passes and what they changed, and HTTP request latency.
//
// One *Metrics is created per registry and shared by internal/httpapi and
// internal/recovery. Only the server packages import it.
package metrics

import "github.com/prometheus/client_golang/prometheus"

// Checkout outcomes (label "outcome" of clasp_checkouts_total).
const (
	OutcomeOK       = "ok"       // a new acquisition (rule L1, L3)
	OutcomeSameRun  = "same_run" // the holding run checked out again (rule L2)
	OutcomeConflict = "conflict" // 409 checkout_conflict
	OutcomeError    = "error"    // any other refusal or failure
)

// Metrics holds the collectors. All fields are safe for concurrent use.
type Metrics struct {
	// Checkouts counts checkout requests by outcome (Outcome* constants).
	Checkouts *prometheus.CounterVec
	// CheckoutConflicts counts 409 checkout_conflict answers by details.reason
	// (held_by_live_run, assigned_to_other_agent, status_not_expected).
	CheckoutConflicts *prometheus.CounterVec
	// LockAdoptions counts checkouts that displaced a dead holder (rule L3).
	LockAdoptions prometheus.Counter
	// Sweeps counts sweeper passes (pass 1 and pass 2 together count once).
	Sweeps prometheus.Counter
	// SweepErrors counts sweeper passes that failed.
	SweepErrors prometheus.Counter
	// SweepRunsExpired counts runs the sweeper failed with lease_expired.
	SweepRunsExpired prometheus.Counter
	// SweepLocksCleared counts issues whose stale locks the sweeper cleared.
	SweepLocksCleared prometheus.Counter
	// SweepDependencyWakes counts the dependency wakes the sweeper sent
	// (RULES.md, D8).
	SweepDependencyWakes prometheus.Counter
	// HTTPRequestDuration observes request latency in seconds by method
	// (the standard ones, every other name as OTHER), route (the mux
	// pattern's path, never the raw path; "unmatched" when none matched)
	// and status code: a bounded label space whatever clients send.
	HTTPRequestDuration *prometheus.HistogramVec
}

// New creates the collectors and registers them on reg. It panics if reg
// already holds collectors with the same names (a programming error: create
// one Metrics per registry and share it).
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Checkouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clasp_checkouts_total",
			Help: "Checkout requests by outcome (ok, same_run, conflict, error).",
		}, []string{"outcome"}),
		CheckoutConflicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clasp_checkout_conflicts_total",
			Help: "Checkouts refused with 409 checkout_conflict, by reason.",
		}, []string{"reason"}),
		LockAdoptions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "clasp_lock_adoptions_total",
			Help: "Checkouts that adopted the lock of a dead holder (rule L3).",
		}),
		Sweeps: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "clasp_sweeps_total",
			Help: "Sweeper passes run.",
		}),
		SweepErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "clasp_sweep_errors_total",
			Help: "Sweeper passes that failed.",
		}),
		SweepRunsExpired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "clasp_sweep_runs_expired_total",
			Help: "Running runs whose lease expired, failed by the sweeper (lease_expired).",
		}),
		SweepLocksCleared: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "clasp_sweep_locks_cleared_total",
			Help: "Issues whose locks named only dead runs, cleared by the sweeper.",
		}),
		SweepDependencyWakes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "clasp_sweep_dependency_wakes_total",
			Help: "Dependency wakes (blockers resolved, children completed) sent by the sweeper.",
		}),
		HTTPRequestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "clasp_http_request_duration_seconds",
			Help:    "HTTP request latency in seconds by method, route pattern and status code.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"method", "route", "code"}),
	}
	reg.MustRegister(m.Checkouts, m.CheckoutConflicts, m.LockAdoptions, m.Sweeps, m.SweepErrors,
		m.SweepRunsExpired, m.SweepLocksCleared, m.SweepDependencyWakes, m.HTTPRequestDuration)
	// Export every known label value from the start, so that rates work
	// before the first event.
	for _, o := range []string{OutcomeOK, OutcomeSameRun, OutcomeConflict, OutcomeError} {
		m.Checkouts.WithLabelValues(o)
	}
	for _, r := range []string{"held_by_live_run", "assigned_to_other_agent", "status_not_expected"} {
		m.CheckoutConflicts.WithLabelValues(r)
	}
	return m
}
