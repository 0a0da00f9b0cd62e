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

	Duration       time.Duration // how long the clients run
	Clients        int           // concurrent clients, each acting in one run of its agent at a time
	Agents         int           // agents the clients share (0: (Clients+1)/2); runs of one agent contend too
	Issues         int           // issues they contend for
	Seed           int64         // random seed of the operation mix
	Out            string        // directory for the history and picture of a violation
	RequestTimeout time.Duration // an answer later than this is an unknown outcome (default 5 s)
	CheckTimeout   time.Duration // give each issue's linearizability check at most this long (default 5 min)
	FailUndecided  bool          // an undecided history (check timed out) is an error too (CI)
	Log            io.Writer     // progress; default discard

	// Process mode (issue 6 item 2): with Binary set (and no ServerURL),
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
	Latency, DropEvery                    time.Duration
}

// Server is a started server.
type Server struct {
	URL        string
	BoardToken string
	Stop       func(ctx context.Context) error
}

// Report is what a run found.
type Report struct {
	Histories    int               `json:"histories"`             // per-issue histories checked
	Operations   int               `json:"operations"`            // recorded operations (all kinds)
	ByKind       map[string]int    `json:"byKind"`                // operations per kind
	Unknown      int               `json:"unknown"`               // outcomes unknown (timeouts, connection errors, 5xx)
	ServerErrors int               `json:"serverErrors"`          //  5xx answers but 503 (also counted as unknown)
	Unavailable  int               `json:"unavailable"`           // 503 answers: the database was unreachable (also counted as unknown)
	Violations   int               `json:"violations"`            // histories porcupine found not linearizable
	Undecided    int               `json:"undecided"`             // histories (issues) the checker ran out of time on
	CheckTook    time.Duration     `json:"checkTook"`             // the linearizability check's wall time
	Partitions   []PartitionResult `json:"partitions"`            // each issue's check
	L7Broken     int               `json:"l7Broken"`              // issues breaking L7 at the end
	Faults       map[string]int    `json:"faults,omitempty"`      // faults injected per kind (process mode)
	Terminated   int               `json:"terminatedConnections"` // database connections pg_terminate_backend ended
	FaultErrors  []string          `json:"faultErrors,omitempty"` // faults that could not be injected
	Files        []string          `json:"files,omitempty"`
	Duration     time.Duration     `json:"duration"`
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
	start    time.Time
	mu       sync.Mutex
	ops      []op
	// inflight[i] cuts client i's call in flight; crashed[i] tells it to
	// abandon its run (CrashEvery). Under mu.
	inflight map[int]context.CancelFunc
	crashed  map[int]bool
	crashes  int
}

// Run sets up a company with Agents agents and Issues todo issues, runs
// Clients clients for Duration, then checks the history. It returns the
// report and an error wrapping ErrViolation when something was found.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Clients < 1 || cfg.Issues < 1 || cfg.Duration <= 0 {
		return nil, fmt.Errorf("verify: need clients >= 1, issues >= 1 and a positive duration")
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
	r := &runner{cfg: cfg, url: cfg.ServerURL, board: cfg.BoardToken, inflight: map[int]context.CancelFunc{}, crashed: map[int]bool{}}
	var cl *cluster
	if r.url == "" && cfg.Binary != "" {
		if cfg.Replicas < 1 {
			cfg.Replicas = 1
		}
		if cfg.LeaseTTL <= 0 {
			cfg.LeaseTTL = 2 * time.Second
		}
		if cfg.SweepInterval <= 0 {
			cfg.SweepInterval = 500 * time.Millisecond
		}
		r.cfg = cfg
		c, err := startCluster(ctx, &cfg)
		if err != nil {
			return nil, err
		}
		defer c.stop(ctx)
		cl = c
		r.urls, r.url, r.board = c.urls(), c.urls()[0], c.token
		r.sendURLs = c.clientURLs()
	} else if r.url == "" {
		if cfg.StartServer == nil {
			return nil, fmt.Errorf("verify: no --server and no embedded server")
		}
		srv, err := cfg.StartServer(ctx, cfg.DataDir, cfg.Log)
		if err != nil {
			return nil, fmt.Errorf("verify: start server: %w", err)
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			_ = srv.Stop(sctx) // teardown after the history is recorded; a stop failure does not change the verdict
		}()
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
	defer tr.CloseIdleConnections()

	agents, keys, issues, err := r.setup(ctx)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.Log, "verify: %d clients, %d agents, %d issues, %s, seed %d, servers %v\n", cfg.Clients, cfg.Agents, cfg.Issues, cfg.Duration, cfg.Seed, r.urls)

	r.start = time.Now()
	fctx, stopFaults := context.WithCancel(ctx)
	defer stopFaults()
	var injectors *sync.WaitGroup
	if cl != nil {
		injectors = cl.inject(fctx, &cfg, cfg.Log)
		if cfg.CrashEvery > 0 {
			injectors.Go(func() {
				r.crashClients(fctx, cfg.CrashEvery, cfg.Clients, rand.New(rand.NewPCG(uint64(cfg.Seed), 1<<32))) // #nosec G115 G404 -- a reproducible crash schedule from the seed's bits, not a secret
			})
		}
	}
	deadline := r.start.Add(cfg.Duration)
	var wg sync.WaitGroup
	for i := range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(i))) // #nosec G115 G404 -- a reproducible client schedule from the seed's bits and the client index, not a secret
			r.client(ctx, i, r.urls[i%len(r.urls)], r.sendURLs[i%len(r.urls)], agents[i%len(agents)], keys[i%len(keys)], issues, rng, deadline)
		}()
	}
	wg.Wait()
	elapsed := time.Since(r.start)

	rep := &Report{ByKind: map[string]int{}, Duration: elapsed, Histories: len(issues)}
	if cl != nil {
		stopFaults()
		injectors.Wait()
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		err := cl.heal(hctx)
		if err == nil {
			err = cl.killAll(hctx)
		}
		cancel()
		cl.mu.Lock()
		rep.Faults, rep.Terminated, rep.FaultErrors = cl.faults, cl.terminated, cl.faultErrors
		if r.crashes > 0 {
			rep.Faults["clientCrash"] = r.crashes
		}
		r.boundUnknowns(cl.killed, cl.drops)
		cl.mu.Unlock()
		open := 0
		for _, o := range r.ops {
			if o.Output.Unknown && o.Return == math.MaxInt64 {
				open++
			}
		}
		fmt.Fprintf(cfg.Log, "verify: %d unknown outcomes stay open to the end of the history\n", open)
		if err != nil {
			return rep, err
		}
	}
	for _, o := range r.ops {
		rep.Operations++
		rep.ByKind[o.Input.Kind]++
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
	var found []string
	for _, id := range issues {
		l, err := r.readIssue(ctx, id)
		if err != nil {
			return rep, fmt.Errorf("verify: final read of issue %s: %w", id, err)
		}
		if !l.L7 {
			rep.L7Broken++
			found = append(found, fmt.Sprintf("issue %s breaks L7 at the end: %+v", id, l))
		}
	}
	t0 := time.Now()
	res, parts, files, err := CheckPartitions(r.history(), cfg.Out, cfg.CheckTimeout)
	rep.CheckTook = time.Since(t0)
	rep.Partitions = parts
	if err != nil {
		return rep, err
	}
	rep.Files = files
	for _, pr := range parts {
		if pr.Result == "unknown" {
			rep.Undecided++
		}
		if pr.Result != "ok" {
			fmt.Fprintf(cfg.Log, "verify: issue %s: %s after %s (%d operations, %d open)\n", pr.Issue, pr.Result, pr.Took.Round(time.Millisecond), pr.Operations, pr.Open)
		}
	}
	if res != porcupine.Ok {
		// Keep the whole recorded history for a re-check (ReadHistory).
		r.mu.Lock()
		hpath := filepath.Join(cfg.Out, "verify-history-"+time.Now().UTC().Format("20060102T150405")+".json")
		werr := os.MkdirAll(cfg.Out, 0o750)
		if werr == nil {
			werr = writeOps(hpath, r.ops)
		}
		r.mu.Unlock()
		if werr != nil {
			return rep, werr
		}
		rep.Files = append(rep.Files, hpath)
	}
	switch res {
	case porcupine.Illegal:
		rep.Violations++
		found = append(found, "the history is not linearizable: see "+fmt.Sprint(files))
	}
	if rep.ServerErrors > 0 {
		found = append(found, fmt.Sprintf("%d answers were 5xx", rep.ServerErrors))
	}
	if rep.Undecided > 0 && cfg.FailUndecided {
		found = append(found, fmt.Sprintf("%d histories undecided within %s each (kept in %v)", rep.Undecided, cfg.CheckTimeout, rep.Files))
	}
	if len(found) > 0 {
		return rep, fmt.Errorf("%w: %v", ErrViolation, found)
	}
	return rep, nil
}

// killGrace is how long after its server process was SIGKILLed (and
// reaped) a call may still take effect: on PostgreSQL a COMMIT the
// process had sent just before it died; on SQLite nothing (the process
// wrote its file itself).
func (r *runner) killGrace() time.Duration {
	if r.cfg.DatabaseURL != "" {
		return time.Second
	}
	return 0
}

// boundUnknowns bounds the return of unknown outcomes (Return MaxInt64
// when recorded) that faults prove over:
//   - a call sent to a replica that was killed after the call: kill +
//     killGrace, a dead process writes nothing more (min with what it has);
//   - a connection reset or EOF seen while the replica's proxy was
//     resetting connections (drops, up to dropSeen after the drop ended):
//     the time it was seen (see cluster.dropConns; kills and pauses of the
//     replica never overlap a drop, so the reset came from the drop).
//
// Unbounded unknown outcomes stay open to the end of the history and make
// the check exponentially slower; the final killAll leaves none.
func (r *runner) boundUnknowns(killed map[string][]time.Time, drops map[string][][2]time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.ops {
		o := &r.ops[i]
		if !o.Output.Unknown {
			continue
		}
		if o.Output.reset && o.Return == math.MaxInt64 {
			for _, d := range drops[o.URL] {
				from, to := d[0].Sub(r.start).Nanoseconds(), d[1].Add(dropSeen).Sub(r.start).Nanoseconds()
				if o.Seen >= from && o.Seen <= to {
					o.Return = o.Seen
					break
				}
			}
		}
		for _, k := range killed[o.URL] {
			if at := k.Sub(r.start).Nanoseconds(); at >= o.Call {
				o.Return = min(o.Return, at+r.killGrace().Nanoseconds())
				break
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
	m := Model()
	parts := m.Partition(history)
	single := m
	single.Partition = nil // each call below checks one partition
	results := make([]PartitionResult, len(parts))
	infos := make([]porcupine.LinearizationInfo, len(parts))
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	var wg sync.WaitGroup
	for i, p := range parts {
		pr := &results[i]
		pr.Operations = len(p)
		for _, o := range p {
			in := o.Input.(Input)
			if in.Issue != "" && pr.Issue == "" {
				pr.Issue = in.Issue
			}
			if o.Output.(Output).Unknown && o.Return == math.MaxInt64 {
				pr.Open++
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			t0 := time.Now()
			res, info := porcupine.CheckOperationsVerbose(single, p, timeout)
			pr.Took = time.Since(t0)
			infos[i] = info
			switch res {
			case porcupine.Ok:
				pr.Result = "ok"
			case porcupine.Illegal:
				pr.Result = "illegal"
			default:
				pr.Result = "unknown"
			}
		}()
	}
	wg.Wait()
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
func answeredUnavailable(out Output) bool {
	return out.Status == http.StatusServiceUnavailable
}

// wireIssue is the part of an issue's JSON the model reads.
type wireIssue struct {
	ID              string  `json:"id"`
	Status          string  `json:"status"`
	AssigneeAgentID *string `json:"assigneeAgentId"`
	CheckoutRunID   *string `json:"checkoutRunId"`
	ExecutionRunID  *string `json:"executionRunId"`
	CheckoutEpoch   int64   `json:"checkoutEpoch"`
}

func (w *wireIssue) lock() *Lock {
	l := &Lock{Status: w.Status, Epoch: w.CheckoutEpoch}
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

// readIssue reads an issue's lock as the board.
func (r *runner) readIssue(ctx context.Context, id string) (*Lock, error) {
	out := r.send(ctx, r.url, r.board, "", "GET", "/api/issues/"+id, nil)
	if !out.OK || out.Issue == nil {
		return nil, fmt.Errorf("GET issue: %+v", out)
	}
	return out.Issue, nil
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
	for i := range r.cfg.Issues {
		var iss struct{ ID string }
		if err := post("/api/companies/"+co.ID+"/issues", map[string]any{"title": fmt.Sprintf("contended %d", i), "status": "todo"}, &iss); err != nil {
			return nil, nil, nil, fmt.Errorf("verify: setup: %w", err)
		}
		issues = append(issues, iss.ID)
	}
	sort.Strings(issues)
	return agents, keys, issues, nil
}
