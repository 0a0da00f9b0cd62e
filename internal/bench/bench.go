// Package bench is `clasp bench`: it drives a clasp server over
// real HTTP on loopback with N concurrent agent clients per phase, runs the
// same SQL statements straight through database/sql as the raw limit, and
// reports throughput, latency percentiles, CPU time per 1,000 operations
// and peak RSS, as a table or JSON.
//
// The server is an embedded SQLite server started in this process (the
// default) or any running server (Config.ServerURL with its board token).
// Workloads:
//
//   - cycle: each client checks out one of its own issues, then releases
//     it (one op = one checkout plus one release, two HTTP requests). Its
//     raw limit is the same two transactions (the lock rule's UPDATE on its
//     fast path plus its activity INSERT, one COMMIT each) run by N
//     goroutines through database/sql on a separate SQLite file with the
//     same PRAGMAs, once with synchronous=FULL (one fsync per commit) and
//     once with NORMAL, interleaved with the HTTP phase in one-second turns
//     (Config.Slice) so that the three see the same machine. The
//     textbook limit (target limit, limit.go) runs in the same turns: the
//     least statements a cycle needs, with the same durability, clients
//     and preparation (SQLite: FULL and NORMAL; PostgreSQL: one CTE per
//     transition), so that http / limit and raw / limit say how far
//     clasp's statements and server are from the database's own limit.
//     On PostgreSQL each row also has its backends' CPU per 1,000 ops
//     (backendCPU), next to this process's.
//   - contended: N runs of N agents race for one issue, round after round
//     (one op = one round: N simultaneous checkouts, then the winner's
//     release with unassign). Every round must have exactly one winner and
//     N-1 checkout_conflict answers; anything else is a failure.
//   - mixed: each request is a read with probability 0.8 (issue get, issue
//     list, inbox, a third each) or else a write (checkout of one of the
//     client's issues, or release of the one it holds). One op = one request.
//   - claim: N agents, of a company of the phase's own, drain Config.Issues
//     unassigned todo issues (default 10,000 when the run has a claim
//     workload): claim-next (POST /api/agents/me/claim, scope unassigned),
//     then PATCH status done, until the claim answers 204. One op = one
//     claim plus its PATCH. No claim may be refused (409) and every issue
//     must be claimed exactly once. In a run with a cycle workload the
//     drain takes turns (Config.Slice) with the cycle phase of the same
//     client count, paused between its turns, and the report gives claim
//     ops/s over cycle ops/s, each over its own turns; the server's cycle
//     goes on in turns past Config.Duration until the drain is done.
//
// Only internal/cli imports this package.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Workload names.
const (
	WorkloadCycle     = "cycle"
	WorkloadContended = "contended"
	WorkloadMixed     = "mixed"
	WorkloadClaim     = "claim"
)

// Targets of a result row.
const (
	TargetHTTP = "http" // the server, over HTTP on loopback
	TargetRaw  = "raw"  // the statements through database/sql, no HTTP, no group commit
	// TargetLimit is the textbook limit: the least statements a cycle
	// needs (see limit.go), same durability and clients, prepared.
	TargetLimit = "limit"
	// TargetHTTPBase is the baseline server of a scale run
	// (Config.SeedIssues): the same as http, without the filler issues.
	TargetHTTPBase = "http-base"
)

// Defaults of Config.
const (
	DefaultDuration = 10 * time.Second
	DefaultIssues   = 1000
	DefaultSync     = "full"
	DefaultSlice    = time.Second
)

// DefaultClients are the client counts of a run when Config.Clients is empty.
var DefaultClients = []int{1, 8, 32}

// Config configures a run. Zero fields take the defaults.
type Config struct {
	// Workloads to run, in order: cycle, contended, mixed (default cycle).
	Workloads []string
	// Clients lists the concurrent clients of each phase (default 1, 8, 32).
	Clients []int
	// Duration of each phase (default 10 s): of each target, when a cycle
	// phase interleaves the server and the raw limit.
	Duration time.Duration
	// Slice is the length of the turns in which a cycle phase interleaves
	// the server, the raw limits and, in a run with claim, the claim drain
	// (default 1 s), so that a machine whose load changes weighs on all
	// of them alike.
	Slice time.Duration
	// Issues is how many issues the run creates (default 1000): one for the
	// contended workload, the others spread over the agents, which each
	// get at least one.
	Issues int
	// Sync is the synchronous mode of the in-process server's SQLite store,
	// "full" (default) or "normal". The raw limit runs with both.
	Sync string
	// ServerURL, when set, is the server to bench instead of an in-process
	// one; Token is its board token (none for a --local-trusted server).
	// No raw phases then: the raw limit is of a local SQLite file, not
	// comparable with any server.
	ServerURL string
	Token     string
	// DatabaseURL, when set, runs the in-process server on PostgreSQL
	// instead of SQLite: a store in a fresh schema of that database,
	// dropped at the end. The raw limit of the cycle phases is then the
	// store's statements straight through pgx (raw.go) on a second
	// fresh schema of the same database. Sync does not apply.
	DatabaseURL string
	// SeedIssues, when positive, bulk-inserts that many filler issues
	// (done, unassigned; seedFiller) into the company of the cycle,
	// contended and mixed phases and into each claim phase's company
	// before they run, so that each company holds Issues + SeedIssues
	// issues: the scale figures (BENCHMARKS.md). In-process servers only
	// (SQLite, or PostgreSQL with DatabaseURL: a second fresh schema).
	// The run then also starts a baseline server (target http-base), the
	// same in every way but without filler, and every phase interleaves
	// the two in Slice turns (claim phases: each drains its own issues, in
	// alternate turns), so that the load of the machine weighs on both
	// alike; Report.Scale gives the ratios of their latencies.
	SeedIssues int
	// SeedAgents, when positive, bulk-inserts that many filler agents
	// (seedAgents: each active, with one API key and one finished run) into
	// the same companies as SeedIssues, so that the key lookup and the
	// agents and runs tables and indexes are of that size (BENCHMARKS.md,
	// "10,000 agents"). They send no request. In-process servers only; it
	// makes a scale run (baseline and ratios) like SeedIssues, with or
	// without it. 0 (the default) adds none.
	SeedAgents int
	// Blockers, when positive, blocks every issue of the HTTP fixture by
	// that many done issues (RULES.md, Dependencies), to weigh what
	// dependencies cost the cycle: compare a run with 2 against one
	// without. 0 (the default) adds none.
	Blockers int
	// NoRaw skips the raw and textbook limit phases.
	NoRaw bool
	// KeepData leaves what the bench made on a --server (ServerURL) as it
	// is. Otherwise, at the end, its agents are terminated and its issues
	// not done cancelled; the companies stay (the API deletes none), named
	// "clasp bench ..." so that they are told apart.
	KeepData bool
	// DataDir holds the databases of the in-process server and the raw
	// phases (default: a new temporary directory, removed at the end).
	DataDir string
	// Progress receives a progress line per second while a phase runs
	// (nil: none). ProgressTTY rewrites one line (\r) instead of printing
	// one line per phase.
	Progress    io.Writer
	ProgressTTY bool
	// Command is the command line recorded in the report.
	Command string
}

// ErrFailed is wrapped by Run's error when the run completed but a check
// failed: unexpected HTTP statuses, or a contended round without exactly
// one winner. The report is complete then.
var ErrFailed = errors.New("benchmark checks failed")

// withDefaults returns c with its zero fields set to the defaults.
func (c Config) withDefaults() Config {
	if len(c.Workloads) == 0 {
		c.Workloads = []string{WorkloadCycle}
	}
	if len(c.Clients) == 0 {
		c.Clients = DefaultClients
	}
	if c.Duration <= 0 {
		c.Duration = DefaultDuration
	}
	if c.Issues <= 0 {
		c.Issues = DefaultIssues
		if slices.Contains(c.Workloads, WorkloadClaim) {
			c.Issues = DefaultClaimIssues
		}
	}
	if c.Slice <= 0 {
		c.Slice = DefaultSlice
	}
	if c.Sync == "" {
		c.Sync = DefaultSync
	}
	c.Sync = strings.ToLower(c.Sync)
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return c
}

// Validate checks c (after defaults): known workloads, positive client counts, enough issues for every
// agent, a sync mode of full or normal.
func (c Config) Validate() error {
	c = c.withDefaults()
	for _, w := range c.Workloads {
		switch w {
		case WorkloadCycle, WorkloadContended, WorkloadMixed, WorkloadClaim:
		default:
			return fmt.Errorf("unknown workload %q: want cycle, contended, mixed or claim", w)
		}
	}
	for _, n := range c.Clients {
		if n < 1 || n > 4096 {
			return fmt.Errorf("clients %d: want 1 to 4096", n)
		}
	}
	if need := slices.Max(c.Clients) + 1; c.Issues < need {
		return fmt.Errorf("issues %d: want at least %d (one per client, plus the contended workload's)", c.Issues, need)
	}
	if c.SeedIssues < 0 || c.SeedIssues > 0 && c.ServerURL != "" {
		return errors.New("seed-issues: a count of 0 or more, with an in-process server only (SQLite or --database-url)")
	}
	if c.SeedAgents < 0 || c.SeedAgents > 0 && c.ServerURL != "" {
		return errors.New("seed-agents: a count of 0 or more, with an in-process server only (SQLite or --database-url)")
	}
	if c.Blockers < 0 || c.Blockers > 1000 {
		return fmt.Errorf("blockers %d: want 0 to 1000", c.Blockers)
	}
	if c.ServerURL != "" && c.DatabaseURL != "" {
		return errors.New("server and database-url: give one or the other")
	}
	if c.Sync != "full" && c.Sync != "normal" {
		return fmt.Errorf("sync %q: want full or normal", c.Sync)
	}
	return nil
}

// Report is the outcome of a run.
type Report struct {
	Command    string    `json:"command"`
	StartedAt  time.Time `json:"startedAt"`
	GoVersion  string    `json:"goVersion"`
	GOOS       string    `json:"goos"`
	GOARCH     string    `json:"goarch"`
	NumCPU     int       `json:"numCPU"`
	GOMAXPROCS int       `json:"gomaxprocs"`
	// Server is "in-process SQLite (synchronous=FULL)" or the server's URL.
	Server string `json:"server"`
	// Duration of each phase, and the issues of the run.
	Duration time.Duration `json:"duration"`
	Issues   int           `json:"issues"`
	// SeedIssues filler issues and SeedAgents filler agents (each with a
	// key and a finished run) were bulk-inserted in each company.
	SeedIssues int `json:"seedIssues,omitempty"`
	SeedAgents int `json:"seedAgents,omitempty"`
	// Blockers is Config.Blockers: the done blockers of every issue.
	Blockers int `json:"blockers,omitempty"`
	// CPUMeasures and OpUnits explain the columns.
	CPUMeasures string `json:"cpuMeasures"`
	// DBCPUMeasures explains the database CPU column ("" when not measured).
	DBCPUMeasures string            `json:"dbCpuMeasures,omitempty"`
	OpUnits       map[string]string `json:"opUnits"`
	Results       []Result          `json:"results"`
	Ratios        []Ratio           `json:"ratios,omitempty"`
	// ClaimRatios compare each claim phase with the cycle phase of the
	// same client count in the same run.
	ClaimRatios []ClaimRatio `json:"claimRatios,omitempty"`
	// Scale compares, phase by phase, the seeded server with the baseline
	// (Config.SeedIssues), measured in the same turns.
	Scale []ScaleRatio `json:"scale,omitempty"`
	// Failures lists what went wrong (empty when every check passed).
	Failures []string `json:"failures,omitempty"`
}

// Result is one phase: a workload against a target at a client count.
type Result struct {
	Workload string  `json:"workload"`
	Target   string  `json:"target"` // http, http-base, raw or limit
	Sync     string  `json:"sync"`   // full or normal ("" for a remote server)
	Clients  int     `json:"clients"`
	Ops      int64   `json:"ops"`
	Seconds  float64 `json:"seconds"`
	OpsPerS  float64 `json:"opsPerSecond"`
	// Latency of one op, in milliseconds (contended: of one checkout attempt).
	P50Ms float64 `json:"p50Ms"`
	P95Ms float64 `json:"p95Ms"`
	P99Ms float64 `json:"p99Ms"`
	// Latency of the op's first request alone, in milliseconds: the
	// checkout of a cycle, the claim of a claim op (0 otherwise).
	FirstP50Ms float64 `json:"firstRequestP50Ms,omitempty"`
	FirstP99Ms float64 `json:"firstRequestP99Ms,omitempty"`
	// CPUSecondsPer1000 is process CPU time (user + system, getrusage)
	// over the phase per 1,000 ops; see Report.CPUMeasures.
	CPUSecondsPer1000 float64 `json:"cpuSecondsPer1000Ops"`
	// DBCPUSecondsPer1000 is the CPU time of the PostgreSQL backends that
	// served the phase's target (user + system, /proc/<pid>/stat of each
	// backend; see backendCPU) per 1,000 ops; 0 when not measured (SQLite
	// runs inside this process: its CPU is in CPUSecondsPer1000).
	DBCPUSecondsPer1000 float64 `json:"dbCpuSecondsPer1000Ops,omitempty"`
	// PeakRSSMB is the process's peak resident set during the phase (MiB).
	PeakRSSMB float64 `json:"peakRssMB"`
	// Writes and Commits count the in-process store's write requests and
	// COMMITs during the phase (Writes/Commits is the group-commit batch).
	Writes  int64 `json:"writes,omitempty"`
	Commits int64 `json:"commits,omitempty"`
	// Requests counts HTTP requests; Errors the unexpected answers.
	Requests int64 `json:"requests,omitempty"`
	Errors   int64 `json:"errors"`
	// Contended: rounds whose winner count was not exactly one.
	BadRounds int64 `json:"badRounds,omitempty"`
	// Claim: refused claims (409; must be 0), issues claimed more than
	// once (extra claims; must be 0) and issues never claimed (must be 0).
	Conflicts  int64  `json:"conflicts,omitempty"`
	Duplicates int64  `json:"duplicates,omitempty"`
	Unclaimed  int64  `json:"unclaimed,omitempty"`
	FirstErr   string `json:"firstError,omitempty"`
}

// Ratio compares the HTTP cycle with the raw limit at one client count.
type Ratio struct {
	Workload string  `json:"workload"`
	Clients  int     `json:"clients"`
	HTTP     float64 `json:"httpOpsPerSecond"`
	HTTPSync string  `json:"httpSync"`
	// SQLite: the raw limit with synchronous=FULL and NORMAL.
	RawFull   float64 `json:"rawFullOpsPerSecond,omitempty"`
	RawNormal float64 `json:"rawNormalOpsPerSecond,omitempty"`
	VsRawFull float64 `json:"httpOverRawFull,omitempty"`
	VsRawNorm float64 `json:"httpOverRawNormal,omitempty"`
	// PostgreSQL: the raw limit through pgx.
	RawPostgres   float64 `json:"rawPostgresOpsPerSecond,omitempty"`
	VsRawPostgres float64 `json:"httpOverRawPostgres,omitempty"`
	// The textbook limit (target limit) and the http and raw rows over it:
	// SQLite with synchronous=FULL and NORMAL, each raw over the limit of
	// its own mode; PostgreSQL through pgx.
	LimitFull              float64 `json:"limitFullOpsPerSecond,omitempty"`
	LimitNormal            float64 `json:"limitNormalOpsPerSecond,omitempty"`
	VsLimitFull            float64 `json:"httpOverLimitFull,omitempty"`
	VsLimitNormal          float64 `json:"httpOverLimitNormal,omitempty"`
	RawFullVsLimitFull     float64 `json:"rawFullOverLimitFull,omitempty"`
	RawNormalVsLimitNormal float64 `json:"rawNormalOverLimitNormal,omitempty"`
	LimitPostgres          float64 `json:"limitPostgresOpsPerSecond,omitempty"`
	VsLimitPostgres        float64 `json:"httpOverLimitPostgres,omitempty"`
	RawVsLimitPostgres     float64 `json:"rawOverLimitPostgres,omitempty"`
	BatchWrite             float64 `json:"httpWritesPerCommit,omitempty"`
}

// ClaimRatio compares the claim workload with the cycle workload at one
// client count, both over HTTP in the same run (>= 0.8).
//
// The claim drain runs in the cycle phase's turns (Config.Slice), each
// workload's ops/s over its own turns, so that the load of the machine
// weighs on both alike.
type ClaimRatio struct {
	Clients int     `json:"clients"`
	Claim   float64 `json:"claimOpsPerSecond"`
	Cycle   float64 `json:"cycleOpsPerSecond"`
	Ratio   float64 `json:"claimOverCycle"`
}

// ScaleRatio compares the latencies of one phase on the seeded server
// (Issues + SeedIssues issues per company) with the baseline's (Issues),
// interleaved in the same run (within 20 %). Latencies in
// ms; First* are the op's first request alone (the checkout of a cycle,
// the claim of a claim op); ratios are seeded over baseline.
type ScaleRatio struct {
	Workload       string  `json:"workload"`
	Clients        int     `json:"clients"`
	BaseIssues     int     `json:"baseIssues"`
	SeededIssues   int     `json:"seededIssues"`
	BaseP50        float64 `json:"baseP50Ms"`
	BaseP99        float64 `json:"baseP99Ms"`
	SeededP50      float64 `json:"seededP50Ms"`
	SeededP99      float64 `json:"seededP99Ms"`
	P50Ratio       float64 `json:"p50Ratio"`
	P99Ratio       float64 `json:"p99Ratio"`
	BaseFirstP50   float64 `json:"baseFirstRequestP50Ms,omitempty"`
	BaseFirstP99   float64 `json:"baseFirstRequestP99Ms,omitempty"`
	SeededFirstP50 float64 `json:"seededFirstRequestP50Ms,omitempty"`
	SeededFirstP99 float64 `json:"seededFirstRequestP99Ms,omitempty"`
	FirstP50Ratio  float64 `json:"firstRequestP50Ratio,omitempty"`
	FirstP99Ratio  float64 `json:"firstRequestP99Ratio,omitempty"`
	// BaseAgents and SeededAgents are the agents of the phase's company on
	// each server when filler agents were seeded (Config.SeedAgents; 0
	// otherwise): the phase's clients, plus the filler on the seeded one.
	BaseAgents   int `json:"baseAgents,omitempty"`
	SeededAgents int `json:"seededAgents,omitempty"`
}

// scaleRatio compares seeded row s with baseline row b; the baseline's
// company has baseIssues issues and baseAgents agents, the seeded one
// seed and seedAgents more.
func scaleRatio(s, b Result, baseIssues, seed, baseAgents, seedAgents int) ScaleRatio {
	r := ScaleRatio{Workload: s.Workload, Clients: s.Clients, BaseIssues: baseIssues, SeededIssues: baseIssues + seed,
		BaseP50: b.P50Ms, BaseP99: b.P99Ms, SeededP50: s.P50Ms, SeededP99: s.P99Ms,
		P50Ratio: ratioOf(s.P50Ms, b.P50Ms), P99Ratio: ratioOf(s.P99Ms, b.P99Ms),
		BaseFirstP50: b.FirstP50Ms, BaseFirstP99: b.FirstP99Ms, SeededFirstP50: s.FirstP50Ms, SeededFirstP99: s.FirstP99Ms,
		FirstP50Ratio: ratioOf(s.FirstP50Ms, b.FirstP50Ms), FirstP99Ratio: ratioOf(s.FirstP99Ms, b.FirstP99Ms)}
	if seedAgents > 0 {
		r.BaseAgents, r.SeededAgents = baseAgents, baseAgents+seedAgents
	}
	return r
}

// opUnits says what one op is, per workload.
var opUnits = map[string]string{
	WorkloadCycle:     "one checkout plus one release (2 HTTP requests; raw: 2 transactions)",
	WorkloadContended: "one round: N simultaneous checkouts of one issue, exactly one winner, then its release; latency is per checkout attempt",
	WorkloadMixed:     "one HTTP request (80% get/list/inbox, 20% checkout or release)",
	WorkloadClaim:     "one claim-next (POST /api/agents/me/claim) plus PATCH status done (2 HTTP requests); each phase drains its own issues",
}

// Run runs every workload of cfg at every client count and returns the
// report. It is four steps: setup (the targets and their fixtures), run
// (the phases, one row per target each), report (the ratios of the rows
// measured side by side) and check (the failures). Errors: a bad config
// (Validate), a server or setup failure; or, with the report complete, an
// error wrapping ErrFailed when a check failed (see Report.Failures).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	b, err := setup(ctx, cfg)
	defer b.teardown()
	if err != nil {
		return nil, err
	}
	rep := b.newReport()
	if err := b.run(ctx, rep); err != nil {
		return rep, err
	}
	report(rep, cfg)
	return rep, check(rep)
}

// benchRun is a run's targets, set up before its phases: the server (and
// the fixture setupHTTP made on it), the baseline of a scale run, the raw
// and textbook limits of the cycle phases, and what to tear down.
type benchRun struct {
	cfg Config
	srv *target
	fx  *fixture
	// fixIssues is how many issues fx holds (cfg.Issues, or one per client
	// plus one when only claim phases run, which make their own).
	fixIssues int
	base      *scaleBase
	// limits holds the raw and limit targets a cycle phase interleaves
	// with the server: SQLite raw full, raw normal, limit full, limit
	// normal; PostgreSQL raw, limit.
	limits []*rawTarget
	// mon is the monitor connection of the database CPU probes
	// (PostgreSQL; nil otherwise).
	mon      *pgMonitor
	cleanups []func()
}

// teardown undoes setup, last first.
func (b *benchRun) teardown() {
	for i := len(b.cleanups) - 1; i >= 0; i-- {
		b.cleanups[i]()
	}
}

// setup starts the targets of cfg (after defaults): the server and its
// fixture; with SeedIssues or SeedAgents, the seeded company and the
// baseline server; for cycle phases on an in-process server (unless
// NoRaw), the raw limits and the textbook limits, each on a database of
// its own. The returned run is never nil; tear it down even on error.
func setup(ctx context.Context, cfg Config) (*benchRun, error) {
	b := &benchRun{cfg: cfg}
	dir := cfg.DataDir
	if dir == "" {
		d, err := os.MkdirTemp("", "clasp-bench-")
		if err != nil {
			return b, fmt.Errorf("bench: temporary directory: %w", err)
		}
		b.cleanups = append(b.cleanups, func() { _ = os.RemoveAll(d) })
		dir = d
	}
	if cfg.DatabaseURL != "" {
		mon, err := newPGMonitor(ctx, cfg.DatabaseURL)
		if err != nil {
			return b, err
		}
		b.mon = mon
		b.cleanups = append(b.cleanups, mon.close)
	}
	srv, err := startTarget(ctx, cfg, dir, b.mon)
	if err != nil {
		return b, err
	}
	b.srv = srv
	b.cleanups = append(b.cleanups, srv.close)
	if cfg.ServerURL != "" && !cfg.KeepData {
		b.cleanups = append(b.cleanups, func() { srv.api.cleanUp(context.WithoutCancel(ctx), cfg.Progress) })
	}

	maxClients := slices.Max(cfg.Clients)
	b.fixIssues = cfg.Issues
	if !slices.ContainsFunc(cfg.Workloads, func(w string) bool { return w != WorkloadClaim }) {
		b.fixIssues = maxClients + 1 // only claim phases, which make their own
	}
	// Making thousands of issues takes seconds: say so before the first
	// phase's line, so that a run is never silent while it starts.
	fmt.Fprintf(cfg.Progress, "%-24s %d agents and %d issues...\n", "setting up", maxClients, b.fixIssues)
	if b.fx, err = setupHTTP(ctx, srv.api, maxClients, b.fixIssues, cfg.Blockers); err != nil {
		return b, err
	}
	if cfg.SeedIssues > 0 || cfg.SeedAgents > 0 {
		if err := seedCompany(ctx, cfg, srv, b.fx.companyID); err != nil {
			return b, err
		}
		bsrv, err := startBaseTarget(ctx, cfg, dir, b.mon)
		if err != nil {
			return b, err
		}
		b.cleanups = append(b.cleanups, bsrv.close)
		bfx, err := setupHTTP(ctx, bsrv.api, maxClients, b.fixIssues, cfg.Blockers)
		if err != nil {
			return b, err
		}
		b.base = &scaleBase{srv: bsrv, fx: bfx}
	}
	if cfg.NoRaw || srv.store == nil || !slices.Contains(cfg.Workloads, WorkloadCycle) {
		return b, nil
	}
	if cfg.DatabaseURL != "" {
		r, drop, err := newPostgresRaw(ctx, cfg.DatabaseURL, b.mon, maxClients, cfg.Issues)
		if err != nil {
			return b, err
		}
		b.cleanups = append(b.cleanups, drop)
		app := newSchemaName("limit_app")
		l, drop, err := newPostgresLimit(ctx, cfg.DatabaseURL, app, maxClients, cfg.Issues)
		if err != nil {
			return b, err
		}
		b.cleanups = append(b.cleanups, drop)
		l.db = b.mon.probe(app)
		b.limits = append(b.limits, r, l)
		return b, nil
	}
	for _, mode := range []string{"full", "normal"} {
		r, err := newSQLiteRaw(ctx, dir, mode, maxClients, cfg.Issues)
		if err != nil {
			return b, err
		}
		b.limits = append(b.limits, r)
	}
	for _, mode := range []string{"full", "normal"} {
		l, err := newSQLiteLimit(ctx, dir, mode, maxClients, cfg.Issues)
		if err != nil {
			return b, err
		}
		b.limits = append(b.limits, l)
	}
	return b, nil
}

// newReport is the report's header for the run's targets.
func (b *benchRun) newReport() *Report {
	cfg := b.cfg
	rep := &Report{
		Command: cfg.Command, StartedAt: time.Now().UTC(), GoVersion: runtime.Version(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH,
		NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Duration: cfg.Duration, Issues: cfg.Issues, SeedIssues: cfg.SeedIssues, SeedAgents: cfg.SeedAgents, Blockers: cfg.Blockers, OpUnits: map[string]string{},
		Server: b.srv.describe,
	}
	for _, w := range cfg.Workloads {
		rep.OpUnits[w] = opUnits[w]
	}
	if b.srv.store != nil {
		rep.CPUMeasures = "process CPU time (getrusage RUSAGE_SELF, user+system) during the phase per 1,000 ops: for http rows the in-process server AND the load-generating HTTP clients (one process); for raw and limit rows their goroutines alone (with SQLite, the database's own work runs in them)"
	} else {
		rep.CPUMeasures = "CPU time of this bench process (the HTTP clients only; the remote server's CPU is not measured) per 1,000 ops"
	}
	if b.mon != nil {
		rep.DBCPUMeasures = "PostgreSQL backends' CPU time (user+system from /proc/<pid>/stat of each backend the target connected, found by application_name in pg_stat_activity) during the phase per 1,000 ops; background processes (WAL writer, checkpointer, autovacuum) not counted"
	}
	return rep
}

// run runs every phase of the run's config and appends its rows to rep:
// per workload and client count, the server (with, in a cycle phase, the
// raw and textbook limits, and in a scale run the baseline, interleaved
// in turns) or, for claim, the drain of each server: in the cycle phase's
// turns when the run has a cycle workload, else alone (its rows are
// reported in the claim workload's place either way).
func (b *benchRun) run(ctx context.Context, rep *Report) error {
	cfg := b.cfg
	pr := &progress{w: cfg.Progress, tty: cfg.ProgressTTY}
	defer pr.finish()
	// With a cycle workload, each claim phase drains in the turns of the
	// cycle phase of its client count; its rows wait in claimRows for the
	// claim workload's place in the report (or, when claim comes first in
	// the workloads, follow the cycle rows).
	sideBySide := slices.Contains(cfg.Workloads, WorkloadCycle)
	claimRows := map[int][]Result{}
	claimFirst := sideBySide && slices.Index(cfg.Workloads, WorkloadClaim) >= 0 && slices.Index(cfg.Workloads, WorkloadClaim) < slices.Index(cfg.Workloads, WorkloadCycle)
	claimTargets := func() []claimTarget {
		targets := []claimTarget{{srv: b.srv, seed: cfg.SeedIssues, seedAgents: cfg.SeedAgents, label: TargetHTTP}}
		if b.base != nil {
			targets = append(targets, claimTarget{srv: b.base.srv, label: TargetHTTPBase})
		}
		return targets
	}
	for _, w := range cfg.Workloads {
		for _, n := range cfg.Clients {
			if err := ctx.Err(); err != nil {
				return err
			}
			if w == WorkloadClaim {
				if sideBySide {
					rep.Results = append(rep.Results, claimRows[n]...)
					continue
				}
				res, err := runClaimPhase(ctx, cfg, claimTargets(), n, pr)
				rep.Results = append(rep.Results, res...)
				if err != nil {
					return err
				}
				continue
			}
			if err := b.httpPhase(ctx, rep, w, n, claimTargets, claimRows, pr); err != nil {
				return err
			}
			if claimFirst && w == WorkloadCycle {
				rep.Results = append(rep.Results, claimRows[n]...)
			}
		}
	}
	return nil
}

// httpPhase runs the phase of workload w at n clients (runHTTPPhase) and
// appends its rows to rep: for a cycle phase of a run with a claim
// workload, with the claim drains of claimTargets in its turns, whose
// rows it adds to claimRows[n].
func (b *benchRun) httpPhase(ctx context.Context, rep *Report, w string, n int, claimTargets func() []claimTarget, claimRows map[int][]Result, pr *progress) error {
	var (
		with   []*rawTarget
		claims []*claimState
	)
	if w == WorkloadCycle {
		with = b.limits
		if slices.Contains(b.cfg.Workloads, WorkloadClaim) {
			var (
				finish func()
				err    error
			)
			claims, finish, err = openClaim(ctx, b.cfg, claimTargets(), n)
			defer finish()
			if err != nil {
				return err
			}
		}
	}
	res, err := runHTTPPhase(ctx, b.srv, b.fx, with, b.base, claims, w, n, b.cfg.Duration, b.cfg.Slice, pr)
	if err != nil {
		return err
	}
	rep.Results = append(rep.Results, res...)
	for _, c := range claims {
		claimRows[n] = append(claimRows[n], c.result(ctx, n))
	}
	return ctx.Err()
}

// find returns the row of workload, target, clients and (when not "")
// sync among rows.
func find(rows []Result, workload, target string, clients int, sync string) (Result, bool) {
	for _, r := range rows {
		if r.Workload == workload && r.Target == target && r.Clients == clients && (sync == "" || r.Sync == sync) {
			return r, true
		}
	}
	return Result{}, false
}

// report fills the ratios of rep from its rows, each between rows of the
// same phase (measured in the same turns) or, for claim, of the same run:
// http and raw over the limits per cycle phase, seeded over baseline per
// phase of a scale run, claim over cycle per client count.
func report(rep *Report, cfg Config) {
	maxClients := slices.Max(cfg.Clients)
	for _, h := range rep.Results {
		if h.Target != TargetHTTP {
			continue
		}
		if b, ok := find(rep.Results, h.Workload, TargetHTTPBase, h.Clients, ""); ok {
			baseIssues, baseAgents := cfg.Issues, maxClients
			if h.Workload == WorkloadClaim {
				baseAgents = h.Clients
			}
			rep.Scale = append(rep.Scale, scaleRatio(h, b, baseIssues, cfg.SeedIssues, baseAgents, cfg.SeedAgents))
		}
		if h.Workload == WorkloadClaim {
			if c, ok := find(rep.Results, WorkloadCycle, TargetHTTP, h.Clients, ""); ok {
				rep.ClaimRatios = append(rep.ClaimRatios, ClaimRatio{Clients: h.Clients, Claim: h.OpsPerS, Cycle: c.OpsPerS, Ratio: ratioOf(h.OpsPerS, c.OpsPerS)})
			}
			continue
		}
		if h.Workload != WorkloadCycle {
			continue
		}
		x := Ratio{Workload: h.Workload, Clients: h.Clients, HTTP: h.OpsPerS, HTTPSync: h.Sync}
		if h.Commits > 0 {
			x.BatchWrite = float64(h.Writes) / float64(h.Commits)
		}
		any := false
		if cfg.DatabaseURL != "" {
			raw, okR := find(rep.Results, WorkloadCycle, TargetRaw, h.Clients, "")
			lim, okL := find(rep.Results, WorkloadCycle, TargetLimit, h.Clients, "")
			if okR {
				x.RawPostgres, x.VsRawPostgres = raw.OpsPerS, ratioOf(h.OpsPerS, raw.OpsPerS)
			}
			if okL {
				x.LimitPostgres, x.VsLimitPostgres = lim.OpsPerS, ratioOf(h.OpsPerS, lim.OpsPerS)
				x.RawVsLimitPostgres = ratioOf(raw.OpsPerS, lim.OpsPerS)
			}
			any = okR || okL
		} else {
			full, okF := find(rep.Results, WorkloadCycle, TargetRaw, h.Clients, "full")
			norm, okN := find(rep.Results, WorkloadCycle, TargetRaw, h.Clients, "normal")
			lf, okLF := find(rep.Results, WorkloadCycle, TargetLimit, h.Clients, "full")
			ln, okLN := find(rep.Results, WorkloadCycle, TargetLimit, h.Clients, "normal")
			if okF && okN {
				x.RawFull, x.VsRawFull = full.OpsPerS, ratioOf(h.OpsPerS, full.OpsPerS)
				x.RawNormal, x.VsRawNorm = norm.OpsPerS, ratioOf(h.OpsPerS, norm.OpsPerS)
			}
			if okLF && okLN {
				x.LimitFull, x.VsLimitFull = lf.OpsPerS, ratioOf(h.OpsPerS, lf.OpsPerS)
				x.LimitNormal, x.VsLimitNormal = ln.OpsPerS, ratioOf(h.OpsPerS, ln.OpsPerS)
				x.RawFullVsLimitFull, x.RawNormalVsLimitNormal = ratioOf(full.OpsPerS, lf.OpsPerS), ratioOf(norm.OpsPerS, ln.OpsPerS)
			}
			any = okF && okN || okLF && okLN
		}
		if any {
			rep.Ratios = append(rep.Ratios, x)
		}
	}
}

// check lists in rep.Failures what went wrong in its rows: unexpected
// answers, contended rounds without exactly one winner, refused or
// duplicate or missed claims, phases without a completed op. It returns
// an error wrapping ErrFailed when there is any.
func check(rep *Report) error {
	for _, r := range rep.Results {
		if r.Errors > 0 {
			rep.Failures = append(rep.Failures, fmt.Sprintf("%s %s clients=%d: %d unexpected answers (first: %s)", r.Workload, r.Target, r.Clients, r.Errors, r.FirstErr))
		}
		if r.BadRounds > 0 {
			rep.Failures = append(rep.Failures, fmt.Sprintf("%s clients=%d: %d rounds without exactly one winner", r.Workload, r.Clients, r.BadRounds))
		}
		if r.Conflicts > 0 || r.Duplicates > 0 || r.Unclaimed > 0 {
			rep.Failures = append(rep.Failures, fmt.Sprintf("%s clients=%d: %d refused claims, %d issues claimed more than once, %d never claimed", r.Workload, r.Clients, r.Conflicts, r.Duplicates, r.Unclaimed))
		}
		if r.Ops == 0 {
			rep.Failures = append(rep.Failures, fmt.Sprintf("%s %s clients=%d: no operation completed", r.Workload, r.Target, r.Clients))
		}
	}
	if len(rep.Failures) > 0 {
		return fmt.Errorf("%w: %s", ErrFailed, strings.Join(rep.Failures, "; "))
	}
	return nil
}

// seedCompany bulk-inserts cfg.SeedIssues filler issues (seedFiller), then
// cfg.SeedAgents filler agents (seedAgents), into company companyID of the
// in-process server srv (its SQLite file, or its PostgreSQL schema:
// seedPostgresFiller, seedPostgresAgents), with a progress line each on
// cfg.Progress.
func seedCompany(ctx context.Context, cfg Config, srv *target, companyID string) error {
	if (cfg.SeedIssues > 0 || cfg.SeedAgents > 0) && srv.dbPath == "" && srv.pgSchema == "" {
		return errors.New("bench: seed: not an in-process server")
	}
	if cfg.SeedIssues > 0 {
		pr := newSeedProgress(cfg.Progress, cfg.ProgressTTY, "seed issues")
		var err error
		if srv.pgSchema != "" {
			err = seedPostgresFiller(ctx, srv.pgURL, srv.pgSchema, companyID, cfg.SeedIssues, pr)
		} else {
			err = seedFiller(ctx, srv.dbPath, companyID, cfg.SeedIssues, pr)
		}
		if err != nil {
			return err
		}
	}
	if cfg.SeedAgents > 0 {
		pr := newSeedProgress(cfg.Progress, cfg.ProgressTTY, "seed agents")
		var err error
		if srv.pgSchema != "" {
			err = seedPostgresAgents(ctx, srv.pgURL, srv.pgSchema, companyID, cfg.SeedAgents, pr)
		} else {
			err = seedAgents(ctx, srv.dbPath, companyID, cfg.SeedAgents, pr)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func ratioOf(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
