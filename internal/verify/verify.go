package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/anishathalye/porcupine"
)

// Config configures one verification run.
type Config struct {
	// ServerURL and BoardToken name a running server; when ServerURL is
	// empty StartServer starts an embedded one in DataDir.
	ServerURL, BoardToken string
	StartServer           func(ctx context.Context, dataDir string, log io.Writer) (*Server, error)
	DataDir               string // for the embedded server (required with StartServer)

	Duration time.Duration // how long the clients run
	Clients  int           // concurrent clients, each acting in one run of its agent at a time
	Agents   int           // agents the clients share (0: (Clients+1)/2); runs of one agent contend too
	Issues   int           // issues they contend for
	// Deps blocks every contended issue by an issue of its own (done at
	// the start), which the clients reopen and resolve: the readiness
	// rules (RULES.md, Dependencies) are checked with the lock rules.
	Deps           bool
	Seed           int64         // random seed of the operation mix
	Out            string        // directory for the history and picture of a violation
	RequestTimeout time.Duration // an answer later than this is an unknown outcome (default 5 s)
	// ServerDeadline (process mode) is the child servers' --request-deadline
	// (also their PostgreSQL statement_timeout); on PostgreSQL it bounds
	// unknown outcomes (deadlineBound). 0: the servers' default, and no
	// such bound.
	ServerDeadline time.Duration
	CheckTimeout   time.Duration // give each issue's linearizability check at most this long (default 5 min)
	FailUndecided  bool          // an undecided history (check timed out) is an error too (CI)
	Log            io.Writer     // progress; default discard

	// Process mode: with Binary set (and no ServerURL),
	// Replicas `Binary serve` child processes serve DataDir's SQLite
	// database (one replica) or a throwaway database created on the
	// PostgreSQL server of DatabaseURL (dropped at the end), with lease
	// TTL LeaseTTL and sweep interval SweepInterval (defaults 2 s and
	// 500 ms, so that faults make runs lost). Client i talks to replica
	// i mod Replicas. Each fault kind with a positive period is injected
	// about once per period (jittered): KillEvery SIGKILLs a random
	// replica and restarts it on the same port; PauseEvery SIGSTOPs one
	// for LeaseTTL + 2 SweepInterval + 0.5 s, then SIGCONTs it;
	// TerminateEvery (PostgreSQL only) ends every database connection
	// with pg_terminate_backend.
	//
	// RestartDBEvery (PostgreSQL, with DBRestartCmd) runs the shell command
	// DBRestartCmd, which restarts the PostgreSQL server (e.g. pg_ctl
	// restart -m immediate). Latency > 0 or DropEvery > 0 puts a
	// toxiproxy proxy in front of each replica (clients talk to it): each
	// direction gets Latency/2 +- Latency/2, and DropEvery drops one
	// proxy's connections for a moment.
	//
	// CrashEvery (process mode) crashes a random client about this often
	// as an agent process dies under SIGKILL: its call in flight is cut
	// (the connection closes mid-request; an unknown outcome, bounded by
	// the next kill of its replica) and its run is abandoned, never
	// finished or used again (the server learns of its death only by the
	// lease running out); after 100-300 ms it opens a new run.
	CrashEvery                            time.Duration
	Binary                                string
	DatabaseURL                           string
	Replicas                              int
	LeaseTTL, SweepInterval               time.Duration
	KillEvery, PauseEvery, TerminateEvery time.Duration
	RestartDBEvery                        time.Duration
	DBRestartCmd                          string
	// FailoverEvery (PostgreSQL, with FailoverCmd) runs the shell command
	// FailoverCmd, which fails the database over: it kills the primary
	// (SIGKILL), promotes its synchronous standby and returns once a new
	// standby is back (scripts/pg-failover.sh failover DIR). DatabaseURL
	// then names both servers (target_session_attrs=read-write). Database
	// restarts and failovers never overlap.
	FailoverEvery      time.Duration
	FailoverCmd        string
	Latency, DropEvery time.Duration
}

// Server is a started server.
type Server struct {
	URL        string
	BoardToken string
	Stop       func(ctx context.Context) error
}

// Report is what a run found.
type Report struct {
	Histories    int                `json:"histories"`             // per-issue histories checked
	Operations   int                `json:"operations"`            // recorded operations (all kinds)
	ByKind       map[string]int     `json:"byKind"`                // operations per kind
	Refused      map[string]int     `json:"refused"`               // answered refusals per error code (checkout_conflict, blocked_by_unresolved, ...)
	Unknown      int                `json:"unknown"`               // outcomes unknown (timeouts, connection errors, 5xx)
	ServerErrors int                `json:"serverErrors"`          //  5xx answers but 503 (also counted as unknown)
	Unavailable  int                `json:"unavailable"`           // 503 answers: the database was unreachable (also counted as unknown)
	Violations   int                `json:"violations"`            // histories porcupine found not linearizable
	Undecided    int                `json:"undecided"`             // histories (issues) the checker ran out of time on
	CheckTook    time.Duration      `json:"checkTook"`             // the linearizability check's wall time
	Partitions   []PartitionResult  `json:"partitions"`            // each issue's check
	L7Broken     int                `json:"l7Broken"`              // issues breaking L7 at the end
	LostWrites   int                `json:"lostWrites"`            // issues whose final state lost an acknowledged checkout (epoch below it)
	Failovers    []FailoverRecovery `json:"failovers,omitempty"`   // each database failover: kill to the first successful checkout
	Faults       map[string]int     `json:"faults,omitempty"`      // faults injected per kind (process mode)
	Terminated   int                `json:"terminatedConnections"` // database connections pg_terminate_backend ended
	FaultErrors  []string           `json:"faultErrors,omitempty"` // faults that could not be injected
	Files        []string           `json:"files,omitempty"`
	Duration     time.Duration      `json:"duration"`
}

// ErrViolation is returned (wrapped) when a history is not linearizable,
// the final state breaks L7, or the server answered 5xx.
var ErrViolation = errors.New("verify: violation")

// op is one recorded operation.
type op struct {
	Client int    `json:"client"`
	Input  Input  `json:"input"`
	Output Output `json:"output"`
	Call   int64  `json:"call"`   // ns since start
	Return int64  `json:"return"` // ns since start; MaxInt64 for unknown outcomes not bounded
	Seen   int64  `json:"seen"`   // ns since start when the client got the answer or the error
	URL    string `json:"url"`    // the replica it was sent to
}

// runner holds one run's shared state.
type runner struct {
	cfg      Config
	hc       *http.Client
	urls     []string // client i uses replica urls[i%len(urls)]
	sendURLs []string // through sendURLs[i%len(urls)] (its proxy, or the same)
	url      string   // setup and final reads
	board    string
	// blockerOf maps a contended issue to its blocker (Config.Deps).
	blockerOf map[string]string
	start     time.Time
	mu        sync.Mutex
	ops       []op
	// inflight[i] cuts client i's call in flight; crashed[i] tells it to
	// abandon its run (CrashEvery). Under mu.
	inflight map[int]context.CancelFunc
	crashed  map[int]bool
	crashes  int

	cl         *cluster        // process mode's replicas (nil otherwise)
	stopFaults func()          // ends the fault injectors (load starts them)
	injectors  *sync.WaitGroup // the fault injectors (process mode)
}

// Run sets up a company with Agents agents and Issues todo issues, runs
// Clients clients for Duration, then checks the history. It returns the
// report and an error wrapping ErrViolation when something was found, or
// ctx's error when ctx ended first (the report then holds what was
// counted so far). Its steps: start (servers), setup (company, agents,
// issues), load (clients and faults), settle (faults healed, unknown
// outcomes bounded), finalReads (L7, acknowledged writes), check
// (linearizability), verdict.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r, teardown, err := start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer teardown()
	agents, keys, issues, err := r.setup(ctx)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.Log, "verify: %d clients, %d agents, %d issues, %s, seed %d, servers %v\n", cfg.Clients, cfg.Agents, cfg.Issues, cfg.Duration, cfg.Seed, r.urls)
	rep := &Report{ByKind: map[string]int{}, Refused: map[string]int{}, Histories: len(issues)}
	rep.Duration = r.load(ctx, agents, keys, issues)
	if err := r.settle(ctx, rep); err != nil {
		return rep, err
	}
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	found, err := r.finalReads(ctx, issues, rep)
	if err != nil {
		return rep, err
	}
	res, files, err := r.check(ctx, rep)
	if err != nil {
		return rep, err
	}
	return rep, r.verdict(rep, res, files, found)
}

// withDefaults checks cfg and fills in its defaults (see Config).
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Clients < 1 || cfg.Issues < 1 || cfg.Duration <= 0 {
		return cfg, fmt.Errorf("verify: need clients >= 1, issues >= 1 and a positive duration")
	}
	if cfg.Agents <= 0 {
		cfg.Agents = (cfg.Clients + 1) / 2
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 5 * time.Second
	}
	if cfg.CheckTimeout <= 0 {
		cfg.CheckTimeout = 5 * time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Out == "" {
		cfg.Out = "."
	}
	if cfg.ServerURL == "" && cfg.Binary != "" {
		if cfg.Replicas < 1 {
			cfg.Replicas = 1
		}
		if cfg.LeaseTTL <= 0 {
			cfg.LeaseTTL = 2 * time.Second
		}
		if cfg.SweepInterval <= 0 {
			cfg.SweepInterval = 500 * time.Millisecond
		}
	}
	if cfg.FailoverCmd != "" && cfg.DatabaseURL == "" {
		return cfg, fmt.Errorf("verify: a failover command needs --database-url (naming the primary and the standby)")
	}
	return cfg, nil
}

// start starts the servers the run checks (process mode: the replicas;
// else the embedded server unless ServerURL names one) and the HTTP client,
// and returns the runner and its teardown (stops what it started).
func start(ctx context.Context, cfg Config) (*runner, func(), error) {
	r := &runner{cfg: cfg, url: cfg.ServerURL, board: cfg.BoardToken, inflight: map[int]context.CancelFunc{}, crashed: map[int]bool{}}
	var stops []func()
	teardown := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	switch {
	case r.url == "" && cfg.Binary != "":
		c, err := startCluster(ctx, &r.cfg)
		if err != nil {
			return nil, nil, err
		}
		stops = append(stops, func() { c.stop(ctx) })
		r.cl = c
		r.urls, r.url, r.board = c.urls(), c.urls()[0], c.token
		r.sendURLs = c.clientURLs()
	case r.url == "":
		if cfg.StartServer == nil {
			return nil, nil, fmt.Errorf("verify: no --server and no embedded server")
		}
		srv, err := cfg.StartServer(ctx, cfg.DataDir, cfg.Log)
		if err != nil {
			return nil, nil, fmt.Errorf("verify: start server: %w", err)
		}
		stops = append(stops, func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			_ = srv.Stop(sctx) // teardown after the history is recorded; a stop failure does not change the verdict
		})
		r.url, r.board = srv.URL, srv.BoardToken
	}
	if r.urls == nil {
		r.urls = []string{r.url}
	}
	if r.sendURLs == nil {
		r.sendURLs = r.urls
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = cfg.Clients + 4
	r.hc = &http.Client{Transport: tr, Timeout: cfg.RequestTimeout}
	stops = append(stops, tr.CloseIdleConnections)
	return r, teardown, nil
}

// load runs the clients for Duration (and, in process mode, the fault
// injectors, stopped by settle) and returns how long they ran.
func (r *runner) load(ctx context.Context, agents, keys, issues []string) time.Duration {
	cfg := r.cfg
	r.start = time.Now()
	fctx, stopFaults := context.WithCancel(ctx)
	r.stopFaults = stopFaults
	if r.cl != nil {
		r.injectors = r.cl.inject(fctx, &cfg, cfg.Log)
		if cfg.CrashEvery > 0 {
			r.injectors.Go(func() {
				r.crashClients(fctx, cfg.CrashEvery, cfg.Clients, rand.New(rand.NewPCG(uint64(cfg.Seed), 1<<32))) // #nosec G115 G404 -- a reproducible crash schedule from the seed's bits, not a secret
			})
		}
	}
	deadline := r.start.Add(cfg.Duration)
	var wg sync.WaitGroup
	for i := range cfg.Clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(i))) // #nosec G115 G404 -- a reproducible client schedule from the seed's bits and the client index, not a secret
			r.client(ctx, i, r.urls[i%len(r.urls)], r.sendURLs[i%len(r.urls)], agents[i%len(agents)], keys[i%len(keys)], issues, rng, deadline)
		})
	}
	wg.Wait()
	return time.Since(r.start)
}

// settle stops the fault injectors, resumes and restarts what they left
// down, kills every replica once more (bounding the calls still unknown),
// bounds the unknown outcomes the faults prove over (boundUnknowns), and
// counts into rep the faults, the failover recoveries and the operations
// by kind and outcome.
func (r *runner) settle(ctx context.Context, rep *Report) error {
	defer r.stopFaults()
	var err error
	if cl := r.cl; cl != nil {
		r.stopFaults()
		r.injectors.Wait()
		if ctx.Err() == nil { // stopped (SIGTERM): no check follows, the teardown stops the replicas
			hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
			err = cl.heal(hctx)
			if err == nil {
				err = cl.killAll(hctx)
			}
			cancel()
		}
		cl.mu.Lock()
		rep.Faults, rep.Terminated, rep.FaultErrors = cl.faults, cl.terminated, cl.faultErrors
		if r.crashes > 0 {
			rep.Faults["clientCrash"] = r.crashes
		}
		r.boundUnknowns(faultLog{killed: cl.killed, drops: cl.drops, pauses: cl.pauses})
		rep.Failovers = r.failoverRecoveries(cl.failovers)
		cl.mu.Unlock()
		open := 0
		for _, o := range r.ops {
			if o.Output.Unknown && o.Return == math.MaxInt64 {
				open++
			}
		}
		fmt.Fprintf(r.cfg.Log, "verify: %d unknown outcomes stay open to the end of the history\n", open)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range r.ops {
		rep.Operations++
		rep.ByKind[o.Input.Kind]++
		if o.Output.Code != "" {
			rep.Refused[o.Output.Code]++
		}
		if o.Output.Unknown {
			rep.Unknown++
		}
		switch {
		case o.Output.Status == http.StatusServiceUnavailable:
			rep.Unavailable++
		case o.Output.Status >= 500:
			rep.ServerErrors++
		}
	}
	return err
}

// FailoverRecovery is one failover seen by the clients: from the primary's
// kill (the failover command's start) to the first successful checkout
// called after it (answered by the promoted standby). Recovered is false
// when no checkout succeeded after it.
type FailoverRecovery struct {
	Took      time.Duration `json:"took"`
	Recovered bool          `json:"recovered"`
	Command   time.Duration `json:"command"` // how long the failover command ran (kill, promote, re-seed)
}

// FailoverSummary describes failover recoveries for a report: how many,
// the p50 and max time from the kill to the first successful checkout, and
// how many saw none.
func FailoverSummary(fs []FailoverRecovery) string {
	var d []time.Duration
	for _, f := range fs {
		if f.Recovered {
			d = append(d, f.Took)
		}
	}
	s := fmt.Sprintf("%d", len(fs))
	if len(d) > 0 {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		s += fmt.Sprintf(", kill to first successful checkout p50 %s max %s", d[(len(d)-1)/2].Round(time.Millisecond), d[len(d)-1].Round(time.Millisecond))
	}
	if n := len(fs) - len(d); n > 0 {
		s += fmt.Sprintf(", %d with no checkout after them", n)
	}
	return s
}

// failoverRecoveries measures each failover of failovers (start, end)
// against the recorded checkouts (the caller holds r.mu or no client runs).
func (r *runner) failoverRecoveries(failovers [][2]time.Time) []FailoverRecovery {
	var out []FailoverRecovery
	for _, f := range failovers {
		kill := f[0].Sub(r.start).Nanoseconds()
		fr := FailoverRecovery{Command: f[1].Sub(f[0])}
		first := int64(math.MaxInt64)
		for _, o := range r.ops {
			if o.Input.Kind == OpCheckout && o.Output.OK && o.Call >= kill && o.Return < first {
				first = o.Return
			}
		}
		if first != math.MaxInt64 {
			fr.Took, fr.Recovered = time.Duration(first-kill), true
		}
		out = append(out, fr)
	}
	return out
}

// finalReads reads every issue once more, after the load and the faults
// (the replicas restarted, the database settled), records each read in the
// history (so the check proves the final state follows from the
// acknowledged writes) and checks invariant L7 and that no acknowledged
// checkout was lost (rep.LostWrites: the final epoch is below the highest
// epoch a checkout of the issue was answered with; epochs only grow). It
// returns what it found wrong.
func (r *runner) finalReads(ctx context.Context, issues []string, rep *Report) ([]string, error) {
	var found []string
	acked := map[string]int64{}
	r.mu.Lock()
	for _, o := range r.ops {
		if o.Input.Kind == OpCheckout && o.Output.OK && o.Output.Issue != nil {
			acked[o.Input.Issue] = max(acked[o.Input.Issue], o.Output.Issue.Epoch)
		}
	}
	r.mu.Unlock()
	for _, id := range issues {
		out := r.record(ctx, r.url, r.url, r.cfg.Clients, Input{Kind: OpRead, Issue: id}, r.board, "", "GET", "/api/issues/"+id, nil)
		if !out.OK || out.Issue == nil {
			return found, fmt.Errorf("verify: final read of issue %s: %+v", id, out)
		}
		l := out.Issue
		if !l.L7 {
			rep.L7Broken++
			found = append(found, fmt.Sprintf("issue %s breaks L7 at the end: %+v", id, l))
		}
		if l.Epoch < acked[id] {
			rep.LostWrites++
			found = append(found, fmt.Sprintf("issue %s ends at checkout epoch %d, below the acknowledged %d: an acknowledged checkout was lost", id, l.Epoch, acked[id]))
		}
	}
	return found, nil
}

// check checks the recorded history for linearizability within
// CheckTimeout (all of it) and counts the per-issue results into rep;
// on a violation it also writes the whole history under Out. It returns
// the overall result and the files written.
func (r *runner) check(ctx context.Context, rep *Report) (porcupine.CheckResult, []string, error) {
	t0 := time.Now()
	res, parts, files, err := CheckPartitionsContext(ctx, r.history(), r.cfg.Out, r.cfg.CheckTimeout)
	rep.CheckTook = time.Since(t0)
	rep.Partitions = parts
	if err != nil {
		return res, files, err
	}
	for _, pr := range parts {
		if pr.Result == "unknown" {
			rep.Undecided++
		}
		if pr.Result != "ok" {
			fmt.Fprintf(r.cfg.Log, "verify: issue %s: %s after %s (%d operations, %d open)\n", pr.Issue, pr.Result, pr.Took.Round(time.Millisecond), pr.Operations, pr.Open)
		}
	}
	if res != porcupine.Ok {
		// Keep the whole recorded history for a re-check (ReadHistory).
		r.mu.Lock()
		hpath := filepath.Join(r.cfg.Out, "verify-history-"+time.Now().UTC().Format("20060102T150405")+".json")
		werr := os.MkdirAll(r.cfg.Out, 0o750)
		if werr == nil {
			werr = writeOps(hpath, r.ops)
		}
		r.mu.Unlock()
		if werr != nil {
			return res, files, werr
		}
		files = append(files, hpath)
	}
	rep.Files = files
	if err := ctx.Err(); err != nil {
		return res, files, err
	}
	return res, files, nil
}

// verdict returns an error wrapping ErrViolation naming what the run found
// (found, a non-linearizable history, 5xx answers but 503, undecided
// histories with FailUndecided), or nil.
func (r *runner) verdict(rep *Report, res porcupine.CheckResult, files, found []string) error {
	if res == porcupine.Illegal {
		rep.Violations++
		found = append(found, "the history is not linearizable: see "+fmt.Sprint(files))
	}
	if rep.ServerErrors > 0 {
		found = append(found, fmt.Sprintf("%d answers were 5xx", rep.ServerErrors))
	}
	if rep.Undecided > 0 && r.cfg.FailUndecided {
		found = append(found, fmt.Sprintf("%d histories undecided within %s (kept in %v)", rep.Undecided, r.cfg.CheckTimeout, rep.Files))
	}
	if len(found) > 0 {
		return fmt.Errorf("%w: %v", ErrViolation, found)
	}
	return nil
}

// killGrace is how long after its server process was SIGKILLed (and
// reaped) a call may still take effect when the replica's database
// sessions could not be seen ending (kill.over): on PostgreSQL a COMMIT
// the process had sent just before it died; on SQLite nothing (the
// process wrote its file itself).
func (r *runner) killGrace() time.Duration {
	if r.cfg.DatabaseURL != "" {
		return time.Second
	}
	return 0
}

// deadlineGrace is what deadlineBound allows beyond the server's request
// deadline and statement timeout: the proxy's latency and the scheduling
// of the server's goroutines.
const deadlineGrace = 2 * time.Second

// deadlineBound is how long after its call an unknown outcome is over on
// PostgreSQL when its replica was not paused meanwhile (0: none): the
// server ends the request at ServerDeadline after it arrived, so its last
// statement was sent by then, and the database cancels a statement
// ServerDeadline after it started (statement_timeout).
func (r *runner) deadlineBound() time.Duration {
	if r.cfg.DatabaseURL == "" || r.cfg.ServerDeadline <= 0 {
		return 0
	}
	return 2*r.cfg.ServerDeadline + deadlineGrace
}

// kill is one SIGKILL of a replica: when the process was reaped, and when
// its effects were over (its database sessions had ended; zero when that
// could not be seen, and killGrace applies).
type kill struct{ at, over time.Time }

// faultLog is what the fault injectors recorded, per replica URL.
type faultLog struct {
	killed map[string][]kill
	drops  map[string][][2]time.Time // each drop's start and end
	pauses map[string][][2]time.Time // each SIGSTOP and its SIGCONT
}

// boundUnknowns bounds the return of unknown outcomes (Return MaxInt64
// when recorded) that faults prove over:
//   - a call sent to a replica that was killed after the call: when the
//     killed process's database sessions had ended (kill.over), else kill
//   - killGrace: a dead process writes nothing more (min with what it
//     has);
//   - a connection reset or EOF seen while the replica's proxy was
//     resetting connections (drops, up to dropSeen after the drop ended):
//     the time it was seen (see cluster.dropConns; kills and pauses of the
//     replica never overlap a drop, so the reset came from the drop);
//   - on PostgreSQL with a server deadline, a call whose replica was not
//     paused from its call to deadlineBound after it: call + deadlineBound
//     (the server's deadline and the statement timeout ended it by then).
//
// Unbounded unknown outcomes stay open to the end of the history and make
// the check exponentially slower; the final killAll leaves none.
func (r *runner) boundUnknowns(f faultLog) {
	r.mu.Lock()
	defer r.mu.Unlock()
	db := r.deadlineBound().Nanoseconds()
	for i := range r.ops {
		o := &r.ops[i]
		if !o.Output.Unknown {
			continue
		}
		if o.Output.reset && o.Return == math.MaxInt64 {
			for _, d := range f.drops[o.URL] {
				from, to := d[0].Sub(r.start).Nanoseconds(), d[1].Add(dropSeen).Sub(r.start).Nanoseconds()
				if o.Seen >= from && o.Seen <= to {
					o.Return = o.Seen
					break
				}
			}
		}
		for _, k := range f.killed[o.URL] {
			if at := k.at.Sub(r.start).Nanoseconds(); at >= o.Call {
				over := at + r.killGrace().Nanoseconds()
				if !k.over.IsZero() {
					over = k.over.Sub(r.start).Nanoseconds()
				}
				o.Return = min(o.Return, over)
				break
			}
		}
		if db > 0 && o.Return > o.Call+db {
			paused := false
			for _, p := range f.pauses[o.URL] {
				from, to := p[0].Sub(r.start).Nanoseconds(), p[1].Sub(r.start).Nanoseconds()
				if from <= o.Call+db && to >= o.Call {
					paused = true
					break
				}
			}
			if !paused {
				o.Return = o.Call + db
			}
		}
	}
}

// dropSeen is how long after a drop ended a reset may still be seen by the
// client (the reset happened during the drop).
const dropSeen = 100 * time.Millisecond

// history returns the recorded operations for porcupine.
func (r *runner) history() []porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return toHistory(r.ops)
}

// toHistory returns ops for porcupine, opens left out (not in the model).
func toHistory(ops []op) []porcupine.Operation {
	out := make([]porcupine.Operation, 0, len(ops))
	for _, o := range ops {
		if o.Input.Kind == OpOpen {
			continue
		}
		out = append(out, porcupine.Operation{ClientId: o.Client, Input: o.Input, Output: o.Output, Call: o.Call, Return: o.Return})
	}
	return out
}

// PartitionResult is the check of one issue's history (see Model).
type PartitionResult struct {
	Issue      string        `json:"issue"`
	Operations int           `json:"operations"` // its operations (the issue's, plus finishes and heartbeats of runs acting on it)
	Open       int           `json:"open"`       // unknown outcomes among them with no bounded return
	Result     string        `json:"result"`     // "ok", "illegal" or "unknown" (undecided: the check ran out of time)
	Took       time.Duration `json:"took"`
}

// Check checks a history against Model, each issue's partition on its
// own with its own timeout (so one hard partition is reported by name and
// cannot starve the others), at most GOMAXPROCS at a time. It returns the
// overall result (Illegal if any partition is, else Unknown if any is
// undecided, else Ok). On a violation it writes, per illegal partition,
// its history (JSON) and porcupine's HTML picture into dir and returns
// their paths.
func Check(history []porcupine.Operation, dir string, timeout time.Duration) (porcupine.CheckResult, []string, error) {
	res, _, files, err := CheckPartitions(history, dir, timeout)
	return res, files, err
}

// CheckPartitions is Check, also returning each partition's result.
func CheckPartitions(history []porcupine.Operation, dir string, timeout time.Duration) (porcupine.CheckResult, []PartitionResult, []string, error) {
	return CheckPartitionsContext(context.Background(), history, dir, timeout)
}

// CheckPartitionsContext is CheckPartitions, where timeout bounds the
// whole check (every partition is decided, or counted undecided, by then)
// and ctx ending stops it at once: the partitions not decided by then are
// "unknown" and the error is ctx's. The search of an abandoned partition
// goes on in the background until porcupine's own timeout (the time left
// when it started) ends it.
func CheckPartitionsContext(ctx context.Context, history []porcupine.Operation, dir string, timeout time.Duration) (porcupine.CheckResult, []PartitionResult, []string, error) {
	m := Model()
	parts := m.Partition(history)
	single := m
	single.Partition = nil // each call below checks one partition
	results := make([]PartitionResult, len(parts))
	infos := make([]porcupine.LinearizationInfo, len(parts))
	t0 := time.Now()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	var mu sync.Mutex // guards results[i].Result/Took and infos once the check may be abandoned
	var wg sync.WaitGroup
	for i, p := range parts {
		pr := &results[i]
		pr.Operations = len(p)
		pr.Result = "unknown"
		for _, o := range p {
			in := o.Input.(Input)
			if in.Issue != "" && pr.Issue == "" {
				pr.Issue = in.Issue
			}
			if o.Output.(Output).Unknown && o.Return == math.MaxInt64 {
				pr.Open++
			}
		}
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-cctx.Done():
				return
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				defer func() { <-sem }()
				left := timeout - time.Since(t0)
				if left <= 0 {
					return
				}
				start := time.Now()
				res, info := porcupine.CheckOperationsVerbose(single, p, left)
				mu.Lock()
				defer mu.Unlock()
				if cctx.Err() != nil && res == porcupine.Unknown {
					return
				}
				pr.Took = time.Since(start)
				infos[i] = info
				switch res {
				case porcupine.Ok:
					pr.Result = "ok"
				case porcupine.Illegal:
					pr.Result = "illegal"
				}
			}()
			select {
			case <-done:
			case <-cctx.Done():
				// Abandoned: the search runs on until its own timeout.
			}
		})
	}
	wg.Wait()
	mu.Lock()
	results = append([]PartitionResult(nil), results...) // a copy no abandoned search writes to
	infos = append([]porcupine.LinearizationInfo(nil), infos...)
	mu.Unlock()
	for i := range results {
		if results[i].Result == "unknown" && results[i].Took == 0 {
			results[i].Took = time.Since(t0)
		}
	}
	if err := ctx.Err(); err != nil {
		return porcupine.Unknown, results, nil, err
	}
	overall := porcupine.Ok
	for _, pr := range results {
		switch {
		case pr.Result == "illegal":
			overall = porcupine.Illegal
		case pr.Result == "unknown" && overall == porcupine.Ok:
			overall = porcupine.Unknown
		}
	}
	if overall != porcupine.Illegal {
		return overall, results, nil, nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return overall, results, nil, err
	}
	stamp := time.Now().UTC().Format("20060102T150405")
	var files []string
	for i, pr := range results {
		if pr.Result != "illegal" {
			continue
		}
		base := filepath.Join(dir, fmt.Sprintf("verify-violation-%s-%d", stamp, i+1))
		data, err := json.MarshalIndent(parts[i], "", " ")
		if err != nil {
			return overall, results, files, err
		}
		if err := os.WriteFile(base+".json", data, 0o600); err != nil {
			return overall, results, files, err
		}
		files = append(files, base+".json")
		if err := porcupine.VisualizePath(single, infos[i], base+".html"); err != nil {
			return overall, results, files, err
		}
		files = append(files, base+".html")
	}
	return overall, results, files, nil
}

// WriteOps writes a recorded history (every operation, with the replica
// it went to) as JSON to path, for ReadOps and a later re-check.
func writeOps(path string, ops []op) error {
	data, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// ReadHistory reads a history written by a run (verify-history-*.json)
// and returns it as porcupine operations (opens left out), for
// re-checking it with Check.
func ReadHistory(path string) ([]porcupine.Operation, error) {
	data, err := os.ReadFile(path) // #nosec G304 -- the recorded history the operator named
	if err != nil {
		return nil, err
	}
	var ops []op
	if err := json.Unmarshal(data, &ops); err != nil {
		return nil, err
	}
	return toHistory(ops), nil
}

// client runs random operations until the deadline: it opens a run of its
// agent, then checks out, releases, reads, heartbeats and now and then
// finishes it and opens another. A run whose finish has an unknown outcome
// is abandoned.
func (r *runner) client(pctx context.Context, id int, url, via, agent, key string, issues []string, rng *rand.Rand, deadline time.Time) {
	run := ""
	for time.Now().Before(deadline) && pctx.Err() == nil {
		ctx, cut := context.WithCancel(pctx)
		r.mu.Lock()
		r.inflight[id] = cut
		r.mu.Unlock()
		run = r.step(ctx, id, url, via, agent, key, issues, rng, run)
		r.mu.Lock()
		delete(r.inflight, id)
		crashed := r.crashed[id]
		delete(r.crashed, id)
		r.mu.Unlock()
		cut()
		if crashed {
			run = "" // abandoned: never finished, never used again
			time.Sleep(100*time.Millisecond + time.Duration(rng.IntN(200))*time.Millisecond)
		}
	}
}

// crashClients crashes a random client about every period (jittered by
// up to +-50%) until ctx ends (Config.CrashEvery).
func (r *runner) crashClients(ctx context.Context, period time.Duration, clients int, rng *rand.Rand) {
	for {
		d := period/2 + time.Duration(rng.Int64N(int64(period)))
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
		i := rng.IntN(clients)
		r.mu.Lock()
		r.crashed[i] = true
		r.crashes++
		if cut := r.inflight[i]; cut != nil {
			cut()
		}
		r.mu.Unlock()
	}
}

// step makes one call of client id in run ("" : it opens one first) and
// returns the run to go on with ("" when it ended or is not live).
func (r *runner) step(ctx context.Context, id int, url, via, agent, key string, issues []string, rng *rand.Rand, run string) string {
	if run == "" {
		out := r.record(ctx, url, via, id, Input{Kind: OpOpen, Agent: agent}, key, "", "POST", "/api/agents/me/runs", map[string]any{})
		if out.OK {
			return out.RunID
		}
		backoff(rng)
		return ""
	}
	issue := issues[rng.IntN(len(issues))]
	var out Output
	switch p := rng.IntN(100); {
	case p < 40:
		out = r.record(ctx, url, via, id, Input{Kind: OpCheckout, Issue: issue, Run: run, Agent: agent}, key, run, "POST", "/api/issues/"+issue+"/checkout",
			map[string]any{"agentId": agent, "expectedStatuses": []string{"todo"}})
	case p < 65:
		u := rng.IntN(2) == 0
		out = r.record(ctx, url, via, id, Input{Kind: OpRelease, Issue: issue, Run: run, Agent: agent, Unassign: u}, key, run, "POST", "/api/issues/"+issue+"/release",
			map[string]any{"unassign": u})
	case p < 85 && r.cfg.Deps && p >= 77:
		kind, status := OpResolve, "done"
		if rng.IntN(2) == 0 {
			kind, status = OpReopen, "todo"
		}
		blocker := r.blockerOf[issue]
		out = r.record(ctx, url, via, id, Input{Kind: kind, Issue: issue, Run: run, Agent: agent}, key, run, "PATCH", "/api/issues/"+blocker,
			map[string]any{"status": status})
	case p < 85:
		r.record(ctx, url, via, id, Input{Kind: OpRead, Issue: issue}, r.board, "", "GET", "/api/issues/"+issue, nil)
	case p < 93:
		out = r.record(ctx, url, via, id, Input{Kind: OpHeartbeat, Run: run, Agent: agent}, key, "", "POST", "/api/runs/"+run+"/heartbeat", map[string]any{})
	default:
		out = r.record(ctx, url, via, id, Input{Kind: OpFinish, Run: run, Agent: agent}, key, "", "POST", "/api/runs/"+run+"/finish", map[string]any{"status": "succeeded"})
		if out.OK || out.Unknown {
			run = ""
		}
	}
	if out.Code == "run_not_live" {
		run = "" // finished, or lost (its lease expired during a fault)
	}
	if out.Unknown {
		backoff(rng) // as a real agent would; a fault's window of unknown outcomes holds fewer calls
	}
	return run
}

// backoff sleeps 20-60 ms, after a call that failed (no answer, 5xx).
func backoff(rng *rand.Rand) {
	time.Sleep(20*time.Millisecond + time.Duration(rng.IntN(40))*time.Millisecond)
}

// record sends one request and appends the operation to the history.
func (r *runner) record(ctx context.Context, url, via string, client int, in Input, token, run, method, path string, body any) Output {
	call := time.Since(r.start).Nanoseconds()
	out := r.send(ctx, via, token, run, method, path, body)
	ret := time.Since(r.start).Nanoseconds()
	seen := ret
	if out.Unknown && !answeredUnavailable(out) {
		ret = math.MaxInt64 // it may take effect any time later (boundUnknowns may bound it)
	}
	if out.notSent {
		return out // refused at connect: it did not happen (a restarting replica)
	}
	r.mu.Lock()
	r.ops = append(r.ops, op{Client: client, Input: in, Output: out, Call: call, Return: ret, Seen: seen, URL: url})
	r.mu.Unlock()
	return out
}

// answeredUnavailable reports whether out is an answered 503 unavailable.
// Its outcome is unknown (the write may or may not have committed) but it
// is over by the time the answer arrived, so its return is the answer
// time: the server answers only after its handler returned, and the
// handler runs its transaction synchronously; a 503 comes from
// clasp.CodeUnavailable, which the stores give only for a connection that
// failed to open (nothing was sent), a backend that ended the session
// (57P01/57P02/57P03: pg_terminate_backend, an immediate shutdown or a
// crash, where the backend has exited, and with it any chance to commit,
// before its connection is seen closed), too many connections (53300,
// nothing ran), a busy SQLite database (rolled back) or a server that is
// shutting down (before any work). Context cancellations and other
// database errors are 500s, which stay open (and fail the run anyway).
//
// A 503 with details.deadlineExceeded (the server's request deadline cut
// the request) is not over at its answer: the statement it had sent may
// still run until its statement timeout; it stays open for boundUnknowns
// (deadlineBound, kills).
func answeredUnavailable(out Output) bool {
	return out.Status == http.StatusServiceUnavailable && !out.cut
}

// wireIssue is the part of an issue's JSON the model reads.
type wireIssue struct {
	ID              string  `json:"id"`
	Status          string  `json:"status"`
	AssigneeAgentID *string `json:"assigneeAgentId"`
	CheckoutRunID   *string `json:"checkoutRunId"`
	ExecutionRunID  *string `json:"executionRunId"`
	CheckoutEpoch   int64   `json:"checkoutEpoch"`
	DependencyReady *bool   `json:"dependencyReady"`
}

func (w *wireIssue) lock() *Lock {
	l := &Lock{Status: w.Status, Epoch: w.CheckoutEpoch, Blocked: w.DependencyReady != nil && !*w.DependencyReady}
	if w.AssigneeAgentID != nil {
		l.Assignee = *w.AssigneeAgentID
	}
	if w.CheckoutRunID != nil {
		l.Holder = *w.CheckoutRunID
	}
	// L7: checkoutRunId set => in_progress and executionRunId = checkoutRunId.
	l.L7 = w.CheckoutRunID == nil || (w.Status == "in_progress" && w.ExecutionRunID != nil && *w.ExecutionRunID == *w.CheckoutRunID)
	return l
}

// send does one HTTP call and classifies its answer.
func (r *runner) send(ctx context.Context, url, token, run, method, path string, body any) Output {
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, url+path, rd)
	if err != nil {
		return Output{Unknown: true, Note: err.Error()}
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if run != "" {
		req.Header.Set("X-Clasp-Run-Id", run)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := r.hc.Do(req)
	if err != nil {
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Op == "dial" {
			return Output{Unknown: true, notSent: true, Note: err.Error()}
		}
		reset := errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
		return Output{Unknown: true, reset: reset, Note: err.Error()}
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return Output{Unknown: true, Status: res.StatusCode, Note: err.Error()}
	}
	out := Output{Status: res.StatusCode}
	switch {
	case res.StatusCode >= 500:
		out.Unknown = true
		out.Note = string(data)
		var e struct {
			Details struct {
				DeadlineExceeded bool `json:"deadlineExceeded"`
			} `json:"details"`
		}
		if json.Unmarshal(data, &e) == nil {
			out.cut = e.Details.DeadlineExceeded
		}
	case res.StatusCode < 300:
		out.OK = true
		var v struct {
			wireIssue
			Identifier *string `json:"identifier"`
			AgentID    *string `json:"agentId"`
		}
		if err := json.Unmarshal(data, &v); err != nil {
			out.Note = "undecodable answer: " + err.Error()
			return out
		}
		if v.Identifier != nil {
			out.Issue = v.wireIssue.lock()
		} else if v.AgentID != nil {
			out.RunID = v.ID
		}
	default:
		var e struct {
			Code string `json:"code"`
		}
		_ = json.Unmarshal(data, &e) // a body that is not an error JSON falls back to http_<status> below
		out.Code = e.Code
		if out.Code == "" {
			out.Code = fmt.Sprintf("http_%d", res.StatusCode)
		}
	}
	return out
}

// setup creates the company, agents (one key each) and todo issues.
func (r *runner) setup(ctx context.Context) (agents, keys, issues []string, err error) {
	post := func(path string, body any, into any) error {
		data, _ := json.Marshal(body)
		req, err := http.NewRequestWithContext(ctx, "POST", r.url+path, bytes.NewReader(data))
		if err != nil {
			return err
		}
		if r.board != "" {
			req.Header.Set("Authorization", "Bearer "+r.board)
		}
		req.Header.Set("Content-Type", "application/json")
		res, err := r.hc.Do(req)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusCreated {
			return fmt.Errorf("POST %s: %d %s", path, res.StatusCode, b)
		}
		return json.Unmarshal(b, into)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(r.cfg.Seed))) // #nosec G115 G404 -- a random name prefix from the clock and seed bits, not a secret
	prefix := "V"
	for range 7 {
		prefix += string(rune('A' + rng.IntN(26))) // #nosec G115 -- a letter A-Z (IntN(26))
	}
	var co struct{ ID string }
	if err := post("/api/companies", map[string]any{"name": "verify " + prefix, "issuePrefix": prefix}, &co); err != nil {
		return nil, nil, nil, fmt.Errorf("verify: setup: %w", err)
	}
	for i := range r.cfg.Agents {
		var a struct{ ID string }
		if err := post("/api/companies/"+co.ID+"/agents", map[string]any{"name": fmt.Sprintf("verifier-%d", i)}, &a); err != nil {
			return nil, nil, nil, fmt.Errorf("verify: setup: %w", err)
		}
		var k struct{ Token string }
		if err := post("/api/agents/"+a.ID+"/keys", map[string]any{}, &k); err != nil {
			return nil, nil, nil, fmt.Errorf("verify: setup: %w", err)
		}
		agents, keys = append(agents, a.ID), append(keys, k.Token)
	}
	r.blockerOf = map[string]string{}
	for i := range r.cfg.Issues {
		body := map[string]any{"title": fmt.Sprintf("contended %d", i), "status": "todo"}
		var blocker struct{ ID string }
		if r.cfg.Deps {
			if err := post("/api/companies/"+co.ID+"/issues", map[string]any{"title": fmt.Sprintf("blocker of contended %d", i), "status": "done"}, &blocker); err != nil {
				return nil, nil, nil, fmt.Errorf("verify: setup: %w", err)
			}
			body["blockedByIssueIds"] = []string{blocker.ID}
		}
		var iss struct{ ID string }
		if err := post("/api/companies/"+co.ID+"/issues", body, &iss); err != nil {
			return nil, nil, nil, fmt.Errorf("verify: setup: %w", err)
		}
		issues = append(issues, iss.ID)
		if r.cfg.Deps {
			r.blockerOf[iss.ID] = blocker.ID
		}
	}
	sort.Strings(issues)
	return agents, keys, issues, nil
}
