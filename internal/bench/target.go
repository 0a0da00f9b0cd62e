package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
	"github.com/clasp-dev/clasp/internal/httpapi"
	"github.com/clasp-dev/clasp/internal/server"
	"github.com/clasp-dev/clasp/internal/store"
	"github.com/clasp-dev/clasp/internal/store/sqlite"
)

// benchLeaseTTL is the lease of the in-process server's runs: long enough
// that no bench run is ever lost between phases.
const benchLeaseTTL = time.Hour

// target is the server under test.
type target struct {
	api *api
	// store is the in-process server's store (nil for a remote server);
	// stats its group-commit counters (nil when it has none).
	store    store.Store
	stats    func() sqlite.WriteStats
	dbPath   string // the in-process SQLite server's file ("" otherwise)
	sync     string // full or normal; "" for a remote server
	describe string
	close    func()
	// pgURL and pgSchema are the in-process PostgreSQL server's database
	// and schema ("" otherwise).
	pgURL, pgSchema string
	// db measures the CPU of the in-process PostgreSQL server's backends
	// (nil otherwise).
	db *backendCPU
}

// startTarget starts the in-process server (SQLite under dir, an HTTP
// server on 127.0.0.1:0, the sweeper at its default interval) or connects
// to cfg.ServerURL. mon, when not nil, probes the PostgreSQL server's
// backends' CPU.
func startTarget(ctx context.Context, cfg Config, dir string, mon *pgMonitor) (*target, error) {
	hc := newHTTPClient(slicesMax(cfg.Clients))
	if cfg.ServerURL != "" {
		t := &target{api: &api{hc: hc, base: strings.TrimRight(cfg.ServerURL, "/"), board: cfg.Token}, describe: cfg.ServerURL,
			close: hc.CloseIdleConnections}
		return t, nil
	}
	if cfg.DatabaseURL != "" {
		return startPostgresTarget(ctx, cfg, "server", hc, mon)
	}
	return startSQLiteTarget(ctx, cfg, filepath.Join(dir, "server.db"), hc)
}

// startSQLiteTarget serves, in this process, a SQLite store at path with
// cfg.Sync (see serveStore).
func startSQLiteTarget(ctx context.Context, cfg Config, path string, hc *http.Client) (*target, error) {
	st, err := sqlite.Open(ctx, path, sqlite.Options{Synchronous: strings.ToUpper(cfg.Sync)})
	if err != nil {
		return nil, fmt.Errorf("bench: open the server's store: %w", err)
	}
	t, err := serveStore(ctx, store.New(st), hc)
	if err != nil {
		return nil, err
	}
	t.stats = st.WriteStats
	t.dbPath = path
	t.sync = strings.ToLower(cfg.Sync)
	t.describe = fmt.Sprintf("in-process SQLite (synchronous=%s) at %s", strings.ToUpper(cfg.Sync), t.api.base)
	return t, nil
}

// startBaseTarget starts the baseline of a scale run (Config.SeedIssues,
// Config.SeedAgents): a second in-process server like the first, which
// gets no filler: SQLite in dir/server-base.db, or PostgreSQL in a fresh
// schema clasp_bench_base_<random> of Config.DatabaseURL.
func startBaseTarget(ctx context.Context, cfg Config, dir string, mon *pgMonitor) (*target, error) {
	hc := newHTTPClient(slicesMax(cfg.Clients))
	if cfg.DatabaseURL != "" {
		return startPostgresTarget(ctx, cfg, "base", hc, mon)
	}
	return startSQLiteTarget(ctx, cfg, filepath.Join(dir, "server-base.db"), hc)
}

// serveStore serves st in this process with the server of `clasp serve`
// (package server) on 127.0.0.1:0: the sweeper at its default interval,
// runs' leases of benchLeaseTTL, no heartbeat scheduler (the bench's
// agents are its own clients), and no per-address rate limit: the bench's
// clients stand for agents on many machines, each with an address of its
// own, while they all come from 127.0.0.1 (the per-credential limits stay,
// each client has its own key). Closing the target stops the server and
// closes st.
func serveStore(ctx context.Context, st interface {
	store.HeartbeatStore
	Close() error
}, hc *http.Client) (*target, error) {
	board, hash := httpapi.NewToken(httpapi.TokenBoard)
	if _, err := st.SettingPutIfAbsent(ctx, "board_token_hash", hash); err != nil {
		_ = st.Close() // setup failed: its error is the one returned
		return nil, fmt.Errorf("bench: store the board token: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = st.Close() // setup failed: its error is the one returned
		return nil, fmt.Errorf("bench: listen on loopback: %w", err)
	}
	srv, err := server.Start(context.WithoutCancel(ctx), ln, server.Config{Store: st, LeaseTTL: benchLeaseTTL, ShutdownTimeout: 5 * time.Second,
		Limits: httpapi.Limits{AddressRate: -1}})
	if err != nil {
		_ = st.Close() // setup failed: its error is the one returned
		return nil, fmt.Errorf("bench: start the server: %w", err)
	}
	return &target{
		api:   &api{hc: hc, base: srv.URL(), board: board},
		store: st,
		close: func() {
			hc.CloseIdleConnections()
			_ = srv.Shutdown(context.Background()) // teardown after the measurement; nothing is left to report to
			_ = st.Close()
		},
	}, nil
}

func slicesMax(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// newHTTPClient returns a client with a keep-alive connection per bench client.
func newHTTPClient(clients int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = clients + 16
	tr.MaxIdleConnsPerHost = clients + 16
	tr.DisableCompression = true
	return &http.Client{Transport: tr}
}

// api sends the bench's requests. board is the board token.
type api struct {
	hc    *http.Client
	base  string
	board string

	mu   sync.Mutex
	made []string // ids of the companies the bench created
}

// createCompany creates a company of the bench (named name, with a prefix
// of letter and random letters) and records it for cleanUp.
func (a *api) createCompany(ctx context.Context, name string, letter string) (*clasp.Company, error) {
	var co *clasp.Company
	err := retryLimited(ctx, func() (err error) {
		co, err = a.client(a.board).CompanyCreate(ctx, client.CompanyCreateRequest{Name: name, IssuePrefix: letter + randomLetters(7)})
		return err
	})
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.made = append(a.made, co.ID)
	a.mu.Unlock()
	return co, nil
}

// cleanUp undoes, as far as the API allows, what the bench made on a
// server it does not own: each of its companies' agents is terminated
// (their keys stop working, their runs end) and each issue not done is
// cancelled, then the company is archived, which takes it out of the
// company list and the board's picker (the API deletes no company: its
// rows stay, and `clasp company unarchive` restores it). What was done is
// said on progress (when not nil).
func (a *api) cleanUp(ctx context.Context, progress io.Writer) {
	board := a.client(a.board)
	a.mu.Lock()
	made := slices.Clone(a.made)
	a.mu.Unlock()
	for _, id := range made {
		var agents []*clasp.Agent
		var issues []*clasp.Issue
		err := retryLimited(ctx, func() (err error) {
			p, err := board.AgentList(ctx, id, client.ListParams{Limit: 1000})
			if err == nil {
				agents, err = p.All(ctx)
			}
			return err
		})
		if err == nil {
			err = parallel(ctx, len(agents), 8, func(ctx context.Context, i int) error {
				if agents[i].Status == clasp.AgentTerminated {
					return nil
				}
				st := clasp.AgentTerminated
				return retryLimited(ctx, func() error {
					_, err := board.AgentUpdate(ctx, agents[i].ID, client.AgentUpdateRequest{Status: &st})
					return err
				})
			})
		}
		if err == nil {
			err = retryLimited(ctx, func() (err error) {
				p, err := board.IssueList(ctx, id, client.IssueListParams{Limit: 1000,
					Statuses: []clasp.IssueStatus{clasp.IssueBacklog, clasp.IssueTodo, clasp.IssueInProgress, clasp.IssueInReview, clasp.IssueBlocked}})
				if err == nil {
					issues, err = p.All(ctx)
				}
				return err
			})
		}
		if err == nil {
			err = parallel(ctx, len(issues), 8, func(ctx context.Context, i int) error {
				st := clasp.IssueCancelled
				return retryLimited(ctx, func() error {
					_, err := board.IssueUpdate(ctx, issues[i].ID, client.IssueUpdateRequest{Status: &st})
					return err
				})
			})
		}
		var co *clasp.Company
		if err == nil {
			err = retryLimited(ctx, func() (err error) {
				co, err = board.CompanyArchive(ctx, id)
				return err
			})
		}
		if progress == nil {
			continue
		}
		if err != nil {
			fmt.Fprintf(progress, "bench: cleaning up company %s on %s failed: %v\n", id, a.base, err)
			continue
		}
		fmt.Fprintf(progress, "bench: company %s (%s) on %s is archived (its %d agents terminated, its %d open issues cancelled; `clasp company unarchive %s` shows it again, --keep-data leaves it as it was)\n",
			co.IssuePrefix, co.Name, a.base, len(agents), len(issues), co.IssuePrefix)
	}
}

// retryLimited calls f until it is not refused for a rate limit (429
// rate_limited), waiting between calls as the answer's retryAfterSeconds
// says (1 s when absent), for at most setupRetryFor: a refused create
// created nothing, so calling again is safe. It returns f's last error, or
// ctx's when ctx ends while it waits.
func retryLimited(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(setupRetryFor)
	for {
		err := f()
		e := clasp.AsError(err)
		if e == nil || e.Code != clasp.CodeRateLimited || time.Now().After(deadline) {
			return err
		}
		wait := time.Second
		if sec, ok := e.Details["retryAfterSeconds"].(float64); ok && sec > 0 {
			wait = time.Duration(sec * float64(time.Second))
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			// Stopped while waiting: the run was interrupted, not refused.
			t.Stop()
			return ctx.Err()
		}
	}
}

// setupRetryFor bounds how long one set-up call waits out rate limits.
const setupRetryFor = 2 * time.Minute

// do sends one request with bearer token and run header (when not empty)
// and reads the whole answer. It returns the status and, when keep is
// true or the status is not 2xx, the body.
func (a *api) do(ctx context.Context, method, path, token, runID string, body []byte, keep bool) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header["Authorization"] = []string{"Bearer " + token}
	}
	if runID != "" {
		req.Header[httpapi.RunIDHeader] = []string{runID}
	}
	if body != nil {
		req.Header["Content-Type"] = []string{"application/json"}
	}
	res, err := a.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	if keep || res.StatusCode/100 != 2 {
		b, err := io.ReadAll(res.Body)
		return res.StatusCode, b, err
	}
	_, err = io.Copy(io.Discard, res.Body)
	return res.StatusCode, nil, err
}

// client returns a typed client with token (for setup).
func (a *api) client(token string) *client.Client {
	return client.New(a.base, client.WithToken(token), client.WithHTTPClient(a.hc), client.WithUserAgent("clasp-bench"))
}

// benchAgent is an agent of the run with its API key.
type benchAgent struct {
	id, key string
	issues  []string // the issues assigned to it (ids)
}

// fixture is what the run created on the server.
type fixture struct {
	companyID string
	agents    []benchAgent
	hot       string // the contended workload's issue (unassigned)
}

// setupHTTP creates, through the API, a company with a random prefix,
// nAgents agents with a key each, one unassigned issue for the contended
// workload and nIssues-1 todo issues assigned round-robin to the agents.
//
// With blockers > 0 it first creates that many done issues, and every
// issue of the run is blocked by all of them (RULES.md, Dependencies):
// each answer then carries its blockers, and every checkout and claim
// decides readiness, at the cost the dependencies add to the cycle.
func setupHTTP(ctx context.Context, a *api, nAgents, nIssues, blockers int) (*fixture, error) {
	board := a.client(a.board)
	co, err := a.createCompany(ctx, "clasp bench", "B")
	if err != nil {
		return nil, fmt.Errorf("bench: create company: %w", err)
	}
	fx := &fixture{companyID: co.ID, agents: make([]benchAgent, nAgents)}
	err = parallel(ctx, nAgents, 8, func(ctx context.Context, i int) error {
		var ag *clasp.Agent
		var key *clasp.APIKey
		if err := retryLimited(ctx, func() (err error) {
			ag, err = board.AgentCreate(ctx, co.ID, client.AgentCreateRequest{Name: fmt.Sprintf("bench-%d", i), Role: "bench"})
			return err
		}); err != nil {
			return fmt.Errorf("create agent: %w", err)
		}
		if err := retryLimited(ctx, func() (err error) {
			key, err = board.AgentKeyCreate(ctx, ag.ID)
			return err
		}); err != nil {
			return fmt.Errorf("create key: %w", err)
		}
		fx.agents[i] = benchAgent{id: ag.ID, key: key.Token}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	var done []string
	for i := range blockers {
		var b *clasp.Issue
		if err := retryLimited(ctx, func() (err error) {
			b, err = board.IssueCreate(ctx, co.ID, client.IssueCreateRequest{Title: fmt.Sprintf("bench blocker %d", i), Status: clasp.IssueDone})
			return err
		}); err != nil {
			return nil, fmt.Errorf("bench: create blocker: %w", err)
		}
		done = append(done, b.ID)
	}
	var hot *clasp.Issue
	err = retryLimited(ctx, func() (err error) {
		hot, err = board.IssueCreate(ctx, co.ID, client.IssueCreateRequest{Title: "contended", Status: clasp.IssueTodo, BlockedByIssueIDs: done})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("bench: create issue: %w", err)
	}
	fx.hot = hot.ID
	ids := make([]string, nIssues-1)
	err = parallel(ctx, len(ids), 8, func(ctx context.Context, i int) error {
		var iss *clasp.Issue
		err := retryLimited(ctx, func() (err error) {
			iss, err = board.IssueCreate(ctx, co.ID, client.IssueCreateRequest{Title: fmt.Sprintf("bench issue %d", i),
				Status: clasp.IssueTodo, AssigneeAgentID: fx.agents[i%nAgents].id, BlockedByIssueIDs: done})
			return err
		})
		if err != nil {
			return fmt.Errorf("create issue: %w", err)
		}
		ids[i] = iss.ID
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	for i, id := range ids {
		ag := &fx.agents[i%nAgents]
		ag.issues = append(ag.issues, id)
	}
	return fx, nil
}

// openRuns opens one run for each of the first n agents; the returned
// function finishes them (best effort).
func openRuns(ctx context.Context, a *api, agents []benchAgent) ([]string, func(), error) {
	runs := make([]string, len(agents))
	err := parallel(ctx, len(agents), 8, func(ctx context.Context, i int) error {
		var r *clasp.Run
		err := retryLimited(ctx, func() (err error) {
			r, err = a.client(agents[i].key).RunOpen(ctx, client.RunOpenRequest{InvocationSource: "bench"})
			return err
		})
		if err != nil {
			return fmt.Errorf("open run: %w", err)
		}
		runs[i] = r.ID
		return nil
	})
	finish := func() {
		_ = parallel(context.WithoutCancel(ctx), len(agents), 8, func(ctx context.Context, i int) error {
			if runs[i] == "" {
				return nil
			}
			_, err := a.client(agents[i].key).RunFinish(ctx, runs[i], client.RunFinishRequest{Status: clasp.RunSucceeded})
			return err
		})
	}
	if err != nil {
		finish()
		return nil, nil, fmt.Errorf("bench: %w", err)
	}
	return runs, finish, nil
}

// parallel calls fn(ctx, i) for i in [0, n) on up to workers goroutines and
// returns the first error (the others' calls are canceled).
func parallel(ctx context.Context, n, workers int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		next  int
		first error
		wg    sync.WaitGroup
	)
	for range min(n, workers) {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				stop := i >= n || first != nil
				mu.Unlock()
				if stop {
					return
				}
				if err := fn(ctx, i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
						cancel()
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

func randomLetters(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = 'A' + b[i]%26
	}
	return string(b)
}

// rawStep names one issue of a raw fixture, the agent and its run.
type rawStep struct {
	IssueID, AgentID, RunID, CompanyID string
}

// rawTarget is a raw limit: a database of its own with the same shape of
// fixture as the server's, and the statements of a checkout and a release
// run straight through the driver. kind is its rows' target: raw (clasp's
// own statements) or limit (the textbook ones, limit.go). sync labels its
// rows: full or normal (SQLite), or PostgreSQL's synchronous_commit. It is
// open only during the phases that use it. db, when not nil, probes its
// PostgreSQL backends' CPU.
type rawTarget struct {
	kind  string
	sync  string
	db    *backendCPU
	steps [][]rawStep // per agent: one step per assigned issue

	open     func(ctx context.Context) error
	close    func()
	checkout func(ctx context.Context, s rawStep) error
	release  func(ctx context.Context, s rawStep) error
}

// newSQLiteRaw returns the raw limit on dir/raw-<mode>.db, opened by
// sqlite.Open with the same PRAGMAs as the server's store and synchronous
// mode (full or normal), with its fixture (setupRawFixture).
func newSQLiteRaw(ctx context.Context, dir, mode string, nAgents, nIssues int) (*rawTarget, error) {
	path := filepath.Join(dir, "raw-"+mode+".db")
	var (
		st  *sqlite.Driver
		raw *sqliteRaw
	)
	r := &rawTarget{kind: TargetRaw, sync: mode}
	r.open = func(ctx context.Context) error {
		s, err := sqlite.Open(ctx, path, sqlite.Options{Synchronous: strings.ToUpper(mode)})
		if err != nil {
			return fmt.Errorf("bench: open the raw store (%s): %w", mode, err)
		}
		st, raw = s, newSQLiteRawRunner(s)
		return nil
	}
	r.close = func() {
		if st != nil {
			_ = st.Close()
			st, raw = nil, nil
		}
	}
	r.checkout = func(ctx context.Context, s rawStep) error { return raw.Checkout(ctx, s) }
	r.release = func(ctx context.Context, s rawStep) error { return raw.Release(ctx, s) }
	if err := r.open(ctx); err != nil {
		return nil, err
	}
	defer r.close()
	steps, err := setupRawFixture(ctx, store.New(st), nAgents, nIssues)
	if err != nil {
		return nil, fmt.Errorf("bench: raw fixture (%s): %w", mode, err)
	}
	r.steps = steps
	return r, nil
}

// setupRawFixture creates in st, through the store API, the same shape of
// fixture as setupHTTP: nAgents agents with a long-lived run each and
// nIssues issues, all but one assigned round-robin. It returns each
// agent's steps.
func setupRawFixture(ctx context.Context, st store.Store, nAgents, nIssues int) ([][]rawStep, error) {
	boardActor := store.Actor{Type: clasp.ActorBoard}
	co, err := st.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "clasp bench raw", IssuePrefix: "RAW", Actor: boardActor})
	if err != nil {
		return nil, err
	}
	type agentRun struct{ agentID, runID string }
	ars := make([]agentRun, nAgents)
	err = parallel(ctx, nAgents, 8, func(ctx context.Context, i int) error {
		ag, err := st.AgentCreate(ctx, &store.AgentCreateParams{CompanyID: co.ID, Name: fmt.Sprintf("bench-%d", i), Actor: boardActor})
		if err != nil {
			return err
		}
		run, err := st.RunOpen(ctx, &store.RunOpenParams{AgentID: ag.ID, LeaseTTL: 24 * time.Hour,
			Actor: store.Actor{Type: clasp.ActorAgent, AgentID: ag.ID, CompanyID: co.ID}})
		if err != nil {
			return err
		}
		ars[i] = agentRun{ag.ID, run.ID}
		return nil
	})
	if err != nil {
		return nil, err
	}
	ids := make([]string, nIssues)
	err = parallel(ctx, nIssues, 8, func(ctx context.Context, i int) error {
		assignee := ""
		if i > 0 { // issue 0 stands for the contended issue of the HTTP fixture
			assignee = ars[(i-1)%nAgents].agentID
		}
		iss, err := st.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: co.ID, Title: fmt.Sprintf("bench issue %d", i),
			Status: clasp.IssueTodo, AssigneeAgentID: assignee, Actor: boardActor})
		if err != nil {
			return err
		}
		ids[i] = iss.ID
		return nil
	})
	if err != nil {
		return nil, err
	}
	steps := make([][]rawStep, nAgents)
	for i, id := range ids[1:] {
		ar := ars[i%nAgents]
		steps[i%nAgents] = append(steps[i%nAgents], rawStep{IssueID: id, AgentID: ar.agentID, RunID: ar.runID, CompanyID: co.ID})
	}
	return steps, nil
}

// errStatus describes an unexpected answer.
func errStatus(what string, status int, body []byte) error {
	if status == 0 {
		return errors.New(what + ": no answer")
	}
	return fmt.Errorf("%s: status %d: %.200s", what, status, bytes.TrimSpace(body))
}
