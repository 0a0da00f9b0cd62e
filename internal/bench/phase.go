package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// meter measures one target of a phase, over one or more time slices: ops
// and latencies, unexpected answers, and the process's CPU time and peak
// RSS during its slices.
type meter struct {
	ops      atomic.Int64
	requests atomic.Int64
	errors   atomic.Int64
	firstErr atomic.Value // string

	mu     sync.Mutex
	lats   []time.Duration
	firsts []time.Duration // latency of each op's first request (cycle, claim)

	wallNs atomic.Int64 // summed over the finished slices
	cpu    time.Duration
	peak   int64

	sliceStart time.Time
	sliceCPU   time.Duration

	// db, when set, measures the database backends' CPU of the target
	// (PostgreSQL): dbCPU sums it over the slices it could be read in
	// (dbSlices).
	db       *backendCPU
	dbStart  map[int32]time.Duration
	dbCPU    time.Duration
	dbSlices int
}

// begin starts a slice.
func (m *meter) begin() {
	if m.db != nil {
		m.dbStart, _ = m.db.sample()
	}
	resetPeakRSS()
	m.sliceStart = time.Now()
	m.sliceCPU = processCPU()
}

// end ends the slice begun last.
func (m *meter) end() {
	m.wallNs.Add(int64(time.Since(m.sliceStart)))
	m.cpu += processCPU() - m.sliceCPU
	m.peak = max(m.peak, peakRSS())
	if m.db != nil {
		if d, ok := m.db.since(m.dbStart); ok {
			m.dbCPU += d
			m.dbSlices++
		}
	}
}

// rate is the ops per second of the finished slices.
func (m *meter) rate() float64 {
	if w := time.Duration(m.wallNs.Load()); w > 0 {
		return float64(m.ops.Load()) / w.Seconds()
	}
	return 0
}

// fail counts an unexpected answer, keeping the first one's text.
func (m *meter) fail(err error) {
	m.errors.Add(1)
	m.firstErr.CompareAndSwap(nil, err.Error())
}

// first records the latency of an op's first request.
func (m *meter) first(d time.Duration) {
	m.mu.Lock()
	m.firsts = append(m.firsts, d)
	m.mu.Unlock()
}

// add merges a client's latencies.
func (m *meter) add(lats []time.Duration) {
	m.mu.Lock()
	m.lats = append(m.lats, lats...)
	m.mu.Unlock()
}

// result fills the measured fields of a Result.
func (m *meter) result(workload, target string, clients int) Result {
	wall := time.Duration(m.wallNs.Load())
	r := Result{Workload: workload, Target: target, Clients: clients, Ops: m.ops.Load(), Seconds: wall.Seconds(),
		Requests: m.requests.Load(), Errors: m.errors.Load(), PeakRSSMB: float64(m.peak) / (1 << 20)}
	if s, ok := m.firstErr.Load().(string); ok {
		r.FirstErr = s
	}
	if r.Seconds > 0 {
		r.OpsPerS = float64(r.Ops) / r.Seconds
	}
	if r.Ops > 0 {
		r.CPUSecondsPer1000 = m.cpu.Seconds() / float64(r.Ops) * 1000
		if m.dbSlices > 0 {
			r.DBCPUSecondsPer1000 = m.dbCPU.Seconds() / float64(r.Ops) * 1000
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	slices.Sort(m.lats)
	r.P50Ms, r.P95Ms, r.P99Ms = percentile(m.lats, 0.50), percentile(m.lats, 0.95), percentile(m.lats, 0.99)
	slices.Sort(m.firsts)
	r.FirstP50Ms, r.FirstP99Ms = percentile(m.firsts, 0.50), percentile(m.firsts, 0.99)
	return r
}

// percentile returns the q-quantile (nearest rank) of sorted, in ms.
func percentile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	i = min(max(i, 0), len(sorted)-1)
	return float64(sorted[i]) / float64(time.Millisecond)
}

// progress prints a line per second while a phase runs.
type progress struct {
	w   io.Writer
	tty bool
	any bool
}

// gauge is one target shown on the progress line.
type gauge struct {
	name string
	m    *meter
}

// watch prints the progress of phase name (its targets' rates and errors)
// until the returned stop is called.
func (p *progress) watch(name string, d time.Duration, gauges ...gauge) (stop func()) {
	if p.w == io.Discard {
		return func() {}
	}
	start := time.Now()
	done := make(chan struct{})
	finished := make(chan struct{})
	line := func(final bool) {
		var b strings.Builder
		if d > 0 {
			fmt.Fprintf(&b, "%-24s %5.1fs/%-4s", name, min(time.Since(start), d*time.Duration(len(gauges))).Seconds(), d*time.Duration(len(gauges)))
		} else {
			fmt.Fprintf(&b, "%-24s %5.1fs", name, time.Since(start).Seconds())
		}
		for _, g := range gauges {
			fmt.Fprintf(&b, "  %s %.0f ops/s", g.name, g.m.rate())
			if e := g.m.errors.Load(); e > 0 {
				fmt.Fprintf(&b, " (%d errors)", e)
			}
		}
		switch {
		case p.tty:
			fmt.Fprintf(p.w, "\r\033[K%s", b.String())
		case final:
			fmt.Fprintln(p.w, b.String())
		}
	}
	if !p.tty {
		if d > 0 {
			fmt.Fprintf(p.w, "%-24s running for %s...\n", name, d*time.Duration(len(gauges)))
		} else {
			fmt.Fprintf(p.w, "%-24s running until drained...\n", name)
		}
	}
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				line(true)
				return
			case <-t.C:
				line(false)
			}
		}
	}()
	p.any = true
	return func() {
		close(done)
		<-finished
	}
}

// finish ends the progress output.
func (p *progress) finish() {
	if p.tty && p.any {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

// runner runs one target's load for one slice, until its deadline.
type runner func(ctx context.Context, deadline time.Time, m *meter)

// turn is one target of an interleaved phase: run runs its load for one
// slice, measured by m. It has had enough turns when it has run for
// budget (when positive) and done (when set) reports true.
type turn struct {
	run    runner
	m      *meter
	budget time.Duration
	done   func() bool
	spent  time.Duration
}

// over reports whether t has had enough turns.
func (t *turn) over() bool {
	return t.spent >= t.budget && (t.done == nil || t.done())
}

// interleave runs the turns in rounds of at most slice each (target 1,
// target 2, ..., target 1, ...), so that a machine whose load changes over
// time weighs on all of them alike, until each has had enough (turn.over):
// a turn with a budget runs min(slice, what is left of it), then slice
// while it waits for done. Each target's meter sums its own slices.
func interleave(ctx context.Context, slice time.Duration, turns []turn) {
	for ctx.Err() == nil {
		ran := false
		for i := range turns {
			t := &turns[i]
			if t.over() {
				continue
			}
			cur := slice
			if t.spent < t.budget {
				cur = min(slice, t.budget-t.spent)
			}
			t.m.begin()
			t.run(ctx, time.Now().Add(cur), t.m)
			t.m.end()
			t.spent += cur
			ran = true
		}
		if !ran {
			return
		}
	}
}

// scaleBase is the baseline of a scale run (Config.SeedIssues): a second
// in-process server without filler issues, with a fixture of its own.
type scaleBase struct {
	srv *target
	fx  *fixture
}

// httpTarget is one server of a phase, its agents' runs, and what its
// slices counted.
type httpTarget struct {
	srv       *target
	fx        *fixture
	runs      []string
	m         *meter
	badRounds atomic.Int64
	writes    int64
	commits   int64
}

// runner returns the load of workload with the target's clients for one slice.
func (h *httpTarget) runner(workload string) runner {
	agents := h.fx.agents[:len(h.runs)]
	return func(ctx context.Context, deadline time.Time, m *meter) {
		var w0 [2]int64
		if h.srv.stats != nil {
			ws := h.srv.stats()
			w0 = [2]int64{ws.Writes, ws.Commits}
		}
		switch workload {
		case WorkloadCycle:
			clientLoop(agents, h.runs, m, func(i int, ag benchAgent, run string) []time.Duration {
				return cycleClient(ctx, h.srv.api, ag, run, deadline, m)
			})
		case WorkloadMixed:
			clientLoop(agents, h.runs, m, func(i int, ag benchAgent, run string) []time.Duration {
				return mixedClient(ctx, h.srv.api, h.fx.companyID, ag, run, deadline, m, uint64(i)) // #nosec G115 -- i is a non-negative worker index
			})
		case WorkloadContended:
			h.badRounds.Add(contendedRounds(ctx, h.srv.api, h.fx.hot, agents, h.runs, deadline, m))
		}
		if h.srv.stats != nil {
			ws := h.srv.stats()
			h.writes, h.commits = h.writes+ws.Writes-w0[0], h.commits+ws.Commits-w0[1]
		}
	}
}

// result is the target's row of the phase.
func (h *httpTarget) result(workload, target string, n int) Result {
	res := h.m.result(workload, target, n)
	res.Sync = h.srv.sync
	res.BadRounds = h.badRounds.Load()
	res.Writes, res.Commits = h.writes, h.commits
	return res
}

// runHTTPPhase runs workload with n clients against the server for d, and
// for the cycle workload the raw limit with n goroutines on each of raws
// (full, then normal) for d each, interleaved with it in slices; with a
// scale baseline (base not nil), the baseline server too, for d, in the
// same turns. With claims (a cycle phase of a run with a claim workload),
// each claim drain takes its turns too (claimState.turn): the server's
// cycle then goes on in turns past d until every drain is done, so that
// claim and cycle are measured side by side, each over its own turns; the
// caller reads the drains' rows (claimState.result). It returns the HTTP
// result first, then the raw ones, then the baseline's (target
// http-base).
func runHTTPPhase(ctx context.Context, srv *target, fx *fixture, raws []*rawTarget, base *scaleBase, claims []*claimState, workload string, n int, d, slice time.Duration, pr *progress) ([]Result, error) {
	var cleanups []func() // finish the phase's runs
	open := func(srv *target, fx *fixture) (*httpTarget, error) {
		runs, finish, err := openRuns(ctx, srv.api, fx.agents[:n])
		if err != nil {
			return nil, err
		}
		cleanups = append(cleanups, finish)
		return &httpTarget{srv: srv, fx: fx, runs: runs, m: &meter{db: srv.db}}, nil
	}
	defer func() {
		for _, f := range cleanups {
			f()
		}
	}()
	main, err := open(srv, fx)
	if err != nil {
		return nil, err
	}
	drained := func() bool {
		for _, c := range claims {
			if !c.drained() {
				return false
			}
		}
		return true
	}
	turns := []turn{{run: main.runner(workload), m: main.m, budget: d, done: drained}}
	gauges := []gauge{{"http", main.m}}
	var baseline *httpTarget
	if base != nil {
		if baseline, err = open(base.srv, base.fx); err != nil {
			return nil, err
		}
		turns = append(turns, turn{run: baseline.runner(workload), m: baseline.m, budget: d})
		gauges = append(gauges, gauge{TargetHTTPBase, baseline.m})
	}
	rawMeters := make([]*meter, len(raws))
	for i, r := range raws {
		if err := r.open(ctx); err != nil {
			return nil, err
		}
		defer r.close()
		rawMeters[i] = &meter{db: r.db}
		turns = append(turns, turn{run: rawRunner(r, n), m: rawMeters[i], budget: d})
		gauges = append(gauges, gauge{r.kind + " " + r.sync, rawMeters[i]})
	}
	name, total := fmt.Sprintf("%s clients=%d", workload, n), d
	for _, c := range claims {
		turns = append(turns, c.claimTurn())
		gauges = append(gauges, gauge{WorkloadClaim + " " + c.label, c.m})
		name, total = fmt.Sprintf("%s+%s clients=%d", workload, WorkloadClaim, n), 0
	}
	stop := pr.watch(name, total, gauges...)
	if len(turns) == 1 {
		slice = d // nothing to interleave with
	}
	interleave(ctx, slice, turns)
	stop()

	out := []Result{main.result(workload, TargetHTTP, n)}
	for i, r := range raws {
		rr := rawMeters[i].result(WorkloadCycle, r.kind, n)
		rr.Sync = r.sync
		out = append(out, rr)
	}
	if baseline != nil {
		out = append(out, baseline.result(workload, TargetHTTPBase, n))
	}
	return out, ctx.Err()
}

// clientLoop runs fn on one goroutine per agent and merges their latencies.
func clientLoop(agents []benchAgent, runs []string, m *meter, fn func(i int, ag benchAgent, run string) []time.Duration) {
	var wg sync.WaitGroup
	for i, ag := range agents {
		wg.Go(func() { m.add(fn(i, ag, runs[i])) })
	}
	wg.Wait()
}

const (
	checkoutTodo  = `{"agentId":"%s","expectedStatuses":["todo"]}`
	checkoutPath  = "/api/issues/%s/checkout"
	releasePath   = "/api/issues/%s/release"
	issueListPath = "/api/companies/%s/issues?status=todo&limit=20"
)

var (
	releaseBody  = []byte(`{}`)
	unassignBody = []byte(`{"unassign":true}`)
)

// cycleClient checks out and releases the agent's issues in turn until
// deadline (at least once); each cycle is one op.
func cycleClient(ctx context.Context, a *api, ag benchAgent, run string, deadline time.Time, m *meter) []time.Duration {
	body := fmt.Appendf(nil, checkoutTodo, ag.id)
	checkouts, releases := make([]string, len(ag.issues)), make([]string, len(ag.issues))
	for i, iss := range ag.issues {
		checkouts[i], releases[i] = fmt.Sprintf(checkoutPath, iss), fmt.Sprintf(releasePath, iss)
	}
	w := newWire(ctx, a)
	defer w.close()
	lats := make([]time.Duration, 0, 1024)
	for k := 0; k == 0 || time.Now().Before(deadline) && ctx.Err() == nil; k++ {
		i := k % len(ag.issues)
		t0 := time.Now()
		st, b, err := w.do(http.MethodPost, checkouts[i], ag.key, run, body, false)
		m.requests.Add(1)
		if err != nil || st != http.StatusOK {
			m.fail(orStatus(err, "checkout", st, b))
			continue
		}
		m.first(time.Since(t0))
		st, b, err = w.do(http.MethodPost, releases[i], ag.key, run, releaseBody, false)
		m.requests.Add(1)
		if err != nil || st != http.StatusOK {
			m.fail(orStatus(err, "release", st, b))
			continue
		}
		lats = append(lats, time.Since(t0))
		m.ops.Add(1)
	}
	return lats
}

// mixedClient sends 80 % reads (issue get, issue list, inbox) and 20 %
// writes (checkout of its next issue, or release of the one it holds)
// until deadline (at least once); each request is one op. It releases what
// it holds at the end.
func mixedClient(ctx context.Context, a *api, companyID string, ag benchAgent, run string, deadline time.Time, m *meter, seed uint64) []time.Duration {
	rng := rand.New(rand.NewPCG(seed, uint64(time.Now().UnixNano()))) // #nosec G404 -- load generation, not a secret
	body := fmt.Appendf(nil, checkoutTodo, ag.id)
	listPath := fmt.Sprintf(issueListPath, companyID)
	lats := make([]time.Duration, 0, 4096)
	held, k := "", 0
	for first := true; first || time.Now().Before(deadline) && ctx.Err() == nil; first = false {
		var (
			what, method, path string
			reqBody            []byte
		)
		switch p := rng.IntN(100); {
		case p < 80:
			method = http.MethodGet
			switch p % 3 {
			case 0:
				what, path = "get issue", "/api/issues/"+ag.issues[rng.IntN(len(ag.issues))]
			case 1:
				what, path = "list issues", listPath
			default:
				what, path = "inbox", "/api/agents/me/inbox-lite"
			}
		case held != "":
			what, method, path, reqBody = "release", http.MethodPost, fmt.Sprintf(releasePath, held), releaseBody
		default:
			k++
			held = ag.issues[k%len(ag.issues)]
			what, method, path, reqBody = "checkout", http.MethodPost, fmt.Sprintf(checkoutPath, held), body
		}
		t0 := time.Now()
		st, b, err := a.do(ctx, method, path, ag.key, run, reqBody, false)
		m.requests.Add(1)
		if err != nil || st != http.StatusOK {
			m.fail(orStatus(err, what, st, b))
			if what == "checkout" {
				held = ""
			}
			continue
		}
		if what == "release" {
			held = ""
		}
		lats = append(lats, time.Since(t0))
		m.ops.Add(1)
	}
	if held != "" {
		_, _, _ = a.do(context.WithoutCancel(ctx), http.MethodPost, fmt.Sprintf(releasePath, held), ag.key, run, releaseBody, false)
	}
	return lats
}

// contendedRounds runs rounds until deadline (at least one): every client
// sends a checkout of issue hot at once; exactly one must win (200) and
// the others get 409; then the winner releases it with unassign, so that
// any agent may win the next round. Each round with one winner is one op;
// it returns the rounds whose winner count was not one. Latency is per
// checkout attempt.
func contendedRounds(ctx context.Context, a *api, hot string, agents []benchAgent, runs []string, deadline time.Time, m *meter) int64 {
	type answer struct {
		client int
		status int
		lat    time.Duration
		err    error
	}
	n := len(agents)
	gos := make([]chan struct{}, n)
	answers := make(chan answer, n)
	var wg sync.WaitGroup
	path, release := fmt.Sprintf(checkoutPath, hot), fmt.Sprintf(releasePath, hot)
	// Each client has its own connection (wire), as in the cycle workload;
	// the main loop sends the winner's release on the winner's connection
	// while that client waits for the next round.
	wires := make([]*wire, n)
	for i := range agents {
		gos[i] = make(chan struct{})
		wires[i] = newWire(ctx, a)
		body := fmt.Appendf(nil, checkoutTodo, agents[i].id)
		wg.Go(func() {
			for range gos[i] {
				t0 := time.Now()
				st, b, err := wires[i].do(http.MethodPost, path, agents[i].key, runs[i], body, false)
				if err == nil && st != http.StatusOK && st != http.StatusConflict {
					err = errStatus("checkout", st, b)
				}
				answers <- answer{client: i, status: st, lat: time.Since(t0), err: err}
			}
		})
	}
	defer func() {
		for _, g := range gos {
			close(g)
		}
		wg.Wait()
		for _, w := range wires {
			w.close()
		}
	}()
	var bad int64
	lats := make([]time.Duration, 0, 4096)
	for first := true; first || time.Now().Before(deadline) && ctx.Err() == nil; first = false {
		for _, g := range gos {
			g <- struct{}{}
		}
		winners := []int{}
		for range n {
			ans := <-answers
			m.requests.Add(1)
			lats = append(lats, ans.lat)
			switch {
			case ans.err != nil:
				m.fail(ans.err)
			case ans.status == http.StatusOK:
				winners = append(winners, ans.client)
			}
		}
		if len(winners) != 1 {
			bad++
			m.fail(fmt.Errorf("round with %d winners, want exactly 1", len(winners)))
		} else {
			m.ops.Add(1)
		}
		for _, w := range winners {
			st, b, err := wires[w].do(http.MethodPost, release, agents[w].key, runs[w], unassignBody, false)
			m.requests.Add(1)
			if err != nil || st != http.StatusOK {
				m.fail(orStatus(err, "release", st, b))
			}
		}
	}
	m.add(lats)
	return bad
}

// orStatus is err, or an unexpected status as an error.
func orStatus(err error, what string, status int, body []byte) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return errStatus(what, status, body)
}

// rawRunner runs the raw cycle (checkout transaction, release transaction)
// on r with n goroutines, each on its own issues, until the deadline (at
// least one cycle each); each cycle is one op.
func rawRunner(r *rawTarget, n int) runner {
	next := make([]int, n) // where each goroutine goes on in the next slice
	return func(ctx context.Context, deadline time.Time, m *meter) {
		var wg sync.WaitGroup
		for i := range n {
			steps := r.steps[i]
			wg.Go(func() {
				lats := make([]time.Duration, 0, 1024)
				defer func() { m.add(lats) }()
				for first := true; first || time.Now().Before(deadline) && ctx.Err() == nil; first = false {
					s := steps[next[i]%len(steps)]
					next[i]++
					t0 := time.Now()
					if err := r.checkout(ctx, s); err != nil {
						m.fail(err)
						return
					}
					if err := r.release(ctx, s); err != nil {
						m.fail(err)
						return
					}
					lats = append(lats, time.Since(t0))
					m.ops.Add(1)
				}
			})
		}
		wg.Wait()
	}
}
