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
	"sort"
	"sync"
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
	CheckTimeout   time.Duration // give the linearizability check at most this long (default 5 min)
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
	Binary                                string
	DatabaseURL                           string
	Replicas                              int
	LeaseTTL, SweepInterval               time.Duration
	KillEvery, PauseEvery, TerminateEvery time.Duration
}

// Server is a started server.
type Server struct {
	URL        string
	BoardToken string
	Stop       func(ctx context.Context) error
}

// Report is what a run found.
type Report struct {
	Histories    int            `json:"histories"`             // per-issue histories checked
	Operations   int            `json:"operations"`            // recorded operations (all kinds)
	ByKind       map[string]int `json:"byKind"`                // operations per kind
	Unknown      int            `json:"unknown"`               // outcomes unknown (timeouts, connection errors, 5xx)
	ServerErrors int            `json:"serverErrors"`          //  5xx answers but 503 (also counted as unknown)
	Unavailable  int            `json:"unavailable"`           // 503 answers: the database was unreachable (also counted as unknown)
	Violations   int            `json:"violations"`            // histories porcupine found not linearizable
	Undecided    int            `json:"undecided"`             // histories the checker ran out of time on
	L7Broken     int            `json:"l7Broken"`              // issues breaking L7 at the end
	Faults       map[string]int `json:"faults,omitempty"`      // faults injected per kind (process mode)
	Terminated   int            `json:"terminatedConnections"` // database connections pg_terminate_backend ended
	FaultErrors  []string       `json:"faultErrors,omitempty"` // faults that could not be injected
	Files        []string       `json:"files,omitempty"`
	Duration     time.Duration  `json:"duration"`
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
	Return int64  `json:"return"` // ns since start; MaxInt64 for unknown outcomes
	URL    string `json:"url"`    // the replica it was sent to
}

// runner holds one run's shared state.
type runner struct {
	cfg   Config
	hc    *http.Client
	urls  []string // client i uses urls[i%len(urls)]
	url   string   // setup and final reads
	board string
	start time.Time
	mu    sync.Mutex
	ops   []op
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
	r := &runner{cfg: cfg, url: cfg.ServerURL, board: cfg.BoardToken}
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
			srv.Stop(sctx)
		}()
		r.url, r.board = srv.URL, srv.BoardToken
	}
	if r.urls == nil {
		r.urls = []string{r.url}
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
	}
	deadline := r.start.Add(cfg.Duration)
	var wg sync.WaitGroup
	for i := range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(i)))
			r.client(ctx, i, r.urls[i%len(r.urls)], agents[i%len(agents)], keys[i%len(keys)], issues, rng, deadline)
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
		cancel()
		cl.mu.Lock()
		rep.Faults, rep.Terminated, rep.FaultErrors = cl.faults, cl.terminated, cl.faultErrors
		r.boundUnknowns(cl.killed)
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
	res, files, err := Check(r.history(), cfg.Out, cfg.CheckTimeout)
	if err != nil {
		return rep, err
	}
	rep.Files = files
	switch res {
	case porcupine.Illegal:
		rep.Violations++
		found = append(found, "the history is not linearizable: see "+fmt.Sprint(files))
	case porcupine.Unknown:
		rep.Undecided++
	}
	if rep.ServerErrors > 0 {
		found = append(found, fmt.Sprintf("%d answers were 5xx", rep.ServerErrors))
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

// boundUnknowns gives each unknown outcome sent to a replica that was
// killed after the call the return time kill + killGrace: a dead process
// writes nothing more. Unbounded unknown outcomes stay open to the end of
// the history and make the check exponentially slower.
func (r *runner) boundUnknowns(killed map[string][]time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.ops {
		o := &r.ops[i]
		if !o.Output.Unknown {
			continue
		}
		for _, k := range killed[o.URL] {
			if at := k.Sub(r.start).Nanoseconds(); at >= o.Call {
				o.Return = at + r.killGrace().Nanoseconds()
				break
			}
		}
	}
}

// history returns the recorded operations for porcupine.
func (r *runner) history() []porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]porcupine.Operation, 0, len(r.ops))
	for _, o := range r.ops {
		if o.Input.Kind == OpOpen {
			continue
		}
		out = append(out, porcupine.Operation{ClientId: o.Client, Input: o.Input, Output: o.Output, Call: o.Call, Return: o.Return})
	}
	return out
}

// Check checks a history against Model. On a violation (porcupine.Illegal)
// it writes history.json and history.html (porcupine's picture) into dir
// and returns their paths.
func Check(history []porcupine.Operation, dir string, timeout time.Duration) (porcupine.CheckResult, []string, error) {
	m := Model()
	res, info := porcupine.CheckOperationsVerbose(m, history, timeout)
	if res != porcupine.Illegal {
		return res, nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, nil, err
	}
	stamp := time.Now().UTC().Format("20060102T150405")
	jpath := filepath.Join(dir, "verify-violation-"+stamp+".json")
	hpath := filepath.Join(dir, "verify-violation-"+stamp+".html")
	data, err := json.MarshalIndent(history, "", " ")
	if err != nil {
		return res, nil, err
	}
	if err := os.WriteFile(jpath, data, 0o644); err != nil {
		return res, nil, err
	}
	if err := porcupine.VisualizePath(m, info, hpath); err != nil {
		return res, []string{jpath}, err
	}
	return res, []string{jpath, hpath}, nil
}

// client runs random operations until the deadline: it opens a run of its
// agent, then checks out, releases, reads, heartbeats and now and then
// finishes it and opens another. A run whose finish has an unknown outcome
// is abandoned.
func (r *runner) client(ctx context.Context, id int, url, agent, key string, issues []string, rng *rand.Rand, deadline time.Time) {
	run := ""
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if run == "" {
			out := r.record(ctx, url, id, Input{Kind: OpOpen, Agent: agent}, key, "", "POST", "/api/agents/me/runs", map[string]any{})
			if out.OK {
				run = out.RunID
			}
			continue
		}
		issue := issues[rng.IntN(len(issues))]
		var out Output
		switch p := rng.IntN(100); {
		case p < 40:
			out = r.record(ctx, url, id, Input{Kind: OpCheckout, Issue: issue, Run: run, Agent: agent}, key, run, "POST", "/api/issues/"+issue+"/checkout",
				map[string]any{"agentId": agent, "expectedStatuses": []string{"todo"}})
		case p < 65:
			u := rng.IntN(2) == 0
			out = r.record(ctx, url, id, Input{Kind: OpRelease, Issue: issue, Run: run, Agent: agent, Unassign: u}, key, run, "POST", "/api/issues/"+issue+"/release",
				map[string]any{"unassign": u})
		case p < 85:
			r.record(ctx, url, id, Input{Kind: OpRead, Issue: issue}, r.board, "", "GET", "/api/issues/"+issue, nil)
		case p < 93:
			out = r.record(ctx, url, id, Input{Kind: OpHeartbeat, Run: run, Agent: agent}, key, "", "POST", "/api/runs/"+run+"/heartbeat", map[string]any{})
		default:
			out = r.record(ctx, url, id, Input{Kind: OpFinish, Run: run, Agent: agent}, key, "", "POST", "/api/runs/"+run+"/finish", map[string]any{"status": "succeeded"})
			if out.OK || out.Unknown {
				run = ""
			}
		}
		if out.Code == "run_not_live" {
			run = "" // finished, or lost (its lease expired during a fault)
		}
	}
}

// record sends one request and appends the operation to the history.
func (r *runner) record(ctx context.Context, url string, client int, in Input, token, run, method, path string, body any) Output {
	call := time.Since(r.start).Nanoseconds()
	out := r.send(ctx, url, token, run, method, path, body)
	ret := time.Since(r.start).Nanoseconds()
	switch {
	case out.Unknown && out.Status == http.StatusServiceUnavailable:
		// The server answered 503 unavailable (its database connection
		// broke, e.g. pg_terminate_backend): the transaction committed or
		// not before the answer; a grace covers the dying backend.
		ret += time.Second.Nanoseconds()
	case out.Unknown:
		ret = math.MaxInt64 // it may take effect any time later
	}
	if out.notSent {
		return out // refused at connect: it did not happen (a restarting replica)
	}
	r.mu.Lock()
	r.ops = append(r.ops, op{Client: client, Input: in, Output: out, Call: call, Return: ret, URL: url})
	r.mu.Unlock()
	return out
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
		return Output{Unknown: true, Note: err.Error()}
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
		json.Unmarshal(data, &e)
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
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(r.cfg.Seed)))
	prefix := "V"
	for range 7 {
		prefix += string(rune('A' + rng.IntN(26)))
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
