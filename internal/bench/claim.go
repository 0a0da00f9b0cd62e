package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
	"github.com/clasp-dev/clasp/internal/store"
	"github.com/clasp-dev/clasp/internal/store/sqlite"
)

// DefaultClaimIssues is how many issues the claim workload drains per
// phase when Config.Issues is not set (10,000).
const DefaultClaimIssues = 10000

const (
	claimPath = "/api/agents/me/claim"
	issuePath = "/api/issues/%s"
)

var (
	claimBody = []byte(`{"scope":"unassigned"}`)
	doneBody  = []byte(`{"status":"done"}`)
)

// claimFixture is a claim phase's own company: n agents with keys and
// issues unassigned todo issues, so that nothing else of the run is
// eligible for their claims.
type claimFixture struct {
	companyID string
	agents    []benchAgent
	issues    map[string]bool // id -> false until claimed
}

// setupClaim creates the claim phase's company through the API, n agents
// with a key each, and issues unassigned todo issues: through the
// in-process server's store when there is one (faster; the same rows the
// API would write), else through the API; then, on an in-process server
// (SQLite or PostgreSQL), seed filler issues and seedAgents filler agents
// (seedCompany, with cfg's progress).
func setupClaim(ctx context.Context, cfg Config, srv *target, n, issues, seed, seedAgents int) (*claimFixture, error) {
	board := srv.api.client(srv.api.board)
	co, err := srv.api.createCompany(ctx, "clasp bench claim", "C")
	if err != nil {
		return nil, fmt.Errorf("bench: claim: create company: %w", err)
	}
	fx := &claimFixture{companyID: co.ID, agents: make([]benchAgent, n), issues: make(map[string]bool, issues)}
	err = parallel(ctx, n, 8, func(ctx context.Context, i int) error {
		var ag *clasp.Agent
		var key *clasp.APIKey
		if err := retryLimited(ctx, func() (err error) {
			ag, err = board.AgentCreate(ctx, co.ID, client.AgentCreateRequest{Name: fmt.Sprintf("claim-%d", i), Role: "bench"})
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
		return nil, fmt.Errorf("bench: claim: %w", err)
	}
	ids := make([]string, issues)
	create := func(ctx context.Context, i int) error {
		title := fmt.Sprintf("claim issue %d", i)
		if srv.store != nil {
			iss, err := srv.store.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: co.ID, Title: title, Status: clasp.IssueTodo,
				Actor: store.Actor{Type: clasp.ActorBoard}})
			if err != nil {
				return fmt.Errorf("create issue: %w", err)
			}
			ids[i] = iss.ID
			return nil
		}
		var iss *clasp.Issue
		err := retryLimited(ctx, func() (err error) {
			iss, err = board.IssueCreate(ctx, co.ID, client.IssueCreateRequest{Title: title, Status: clasp.IssueTodo})
			return err
		})
		if err != nil {
			return fmt.Errorf("create issue: %w", err)
		}
		ids[i] = iss.ID
		return nil
	}
	if err := parallel(ctx, issues, 32, create); err != nil {
		return nil, fmt.Errorf("bench: claim: %w", err)
	}
	for _, id := range ids {
		fx.issues[id] = false
	}
	cfg.SeedIssues, cfg.SeedAgents = seed, seedAgents
	if err := seedCompany(ctx, cfg, srv, co.ID); err != nil {
		return nil, err
	}
	return fx, nil
}

// claimTarget is a server a claim phase drains issues on: seed filler
// issues and seedAgents filler agents are added to its claim company;
// label is its rows' target.
type claimTarget struct {
	srv        *target
	seed       int
	seedAgents int
	label      string
}

// claimState is one target's drain in progress.
type claimState struct {
	claimTarget
	fx        *claimFixture
	runs      []string
	m         *meter
	conflicts atomic.Int64
	mu        sync.Mutex
	claimed   map[string]int
	stopped   []bool // per agent: its claim answered 204, or it failed
	// writes and commits sum the in-process store's counts over the
	// drain's turns.
	writes, commits int64
}

// openClaim sets up each target's drain with n agents (setupClaim, then a
// run per agent). finish finishes the runs; call it even on error.
func openClaim(ctx context.Context, cfg Config, targets []claimTarget, n int) (states []*claimState, finish func(), err error) {
	var finishes []func()
	finish = func() {
		for _, f := range finishes {
			f()
		}
	}
	for _, t := range targets {
		fx, err := setupClaim(ctx, cfg, t.srv, n, cfg.Issues, t.seed, t.seedAgents)
		if err != nil {
			return nil, finish, err
		}
		runs, fin, err := openRuns(ctx, t.srv.api, fx.agents)
		if err != nil {
			return nil, finish, err
		}
		finishes = append(finishes, fin)
		states = append(states, &claimState{claimTarget: t, fx: fx, runs: runs, m: &meter{db: t.srv.db},
			claimed: make(map[string]int, cfg.Issues), stopped: make([]bool, n)})
	}
	return states, finish, nil
}

// drained reports whether every agent of the drain is done (its claim
// answered 204, or it failed).
func (st *claimState) drained() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return !slices.Contains(st.stopped, false)
}

// turn is one turn of the drain: the agents not done claim and finish
// issues until the deadline, then wait (the drain is paused until its
// next turn).
func (st *claimState) turn(ctx context.Context, deadline time.Time, m *meter) {
	var w0 sqlite.WriteStats
	if st.srv.stats != nil {
		w0 = st.srv.stats()
	}
	clientLoop(st.fx.agents, st.runs, m, func(i int, ag benchAgent, run string) []time.Duration {
		st.mu.Lock()
		stopped := st.stopped[i]
		st.mu.Unlock()
		if stopped {
			return nil
		}
		ids, lats, stopped := claimClient(ctx, st.srv.api, ag, run, deadline, m, &st.conflicts)
		st.mu.Lock()
		for _, id := range ids {
			st.claimed[id]++
		}
		st.stopped[i] = stopped
		st.mu.Unlock()
		return lats
	})
	if st.srv.stats != nil {
		w := st.srv.stats()
		st.writes, st.commits = st.writes+w.Writes-w0.Writes, st.commits+w.Commits-w0.Commits
	}
}

// claimTurn is the drain as a turn of an interleaved phase: it runs until
// drained.
func (st *claimState) claimTurn() turn {
	return turn{run: st.turn, m: st.m, done: st.drained}
}

// runClaimPhase drains a fresh set of issues with n agents on each target
// (setupClaim): each agent's run claims (POST /api/agents/me/claim, scope
// unassigned), then sets the issue done (PATCH status done, which clears
// its locks), until the claim answers 204. With two targets (a scale run)
// they drain in alternate turns of slice, so that both see the same
// machine; one target drains in one go. One op = one claim plus its
// PATCH. It returns a row per target, in order, with the checks of each
// drain (claimState.result). A run with a cycle workload drains its claim
// issues in the cycle phase's turns instead (runHTTPPhase).
func runClaimPhase(ctx context.Context, cfg Config, targets []claimTarget, n int, pr *progress) ([]Result, error) {
	states, finish, err := openClaim(ctx, cfg, targets, n)
	defer finish()
	if err != nil {
		return nil, err
	}
	var (
		gauges []gauge
		turns  []turn
	)
	for _, st := range states {
		gauges = append(gauges, gauge{st.label, st.m})
		turns = append(turns, st.claimTurn())
	}
	slice := cfg.Slice
	if len(turns) == 1 {
		slice = 24 * time.Hour // nothing to take turns with
	}
	stop := pr.watch(fmt.Sprintf("claim clients=%d", n), 0, gauges...)
	interleave(ctx, slice, turns)
	stop()
	out := make([]Result, 0, len(states))
	for _, st := range states {
		out = append(out, st.result(ctx, n))
	}
	return out, ctx.Err()
}

// result is the target's row of the drain, with its checks: no claim
// refused (Result.Conflicts counts the 409s), every issue claimed exactly
// once (Result.Duplicates, Result.Unclaimed), no todo issue left in the
// company.
func (st *claimState) result(ctx context.Context, n int) Result {
	m, srv, fx := st.m, st.srv, st.fx
	res := m.result(WorkloadClaim, st.label, n)
	res.Sync = srv.sync
	res.Writes, res.Commits = st.writes, st.commits
	res.Conflicts = st.conflicts.Load()
	for id, k := range st.claimed {
		if _, ok := fx.issues[id]; !ok {
			m.fail(fmt.Errorf("claimed issue %s is not one of the phase's", id))
			continue
		}
		if k > 1 {
			res.Duplicates += int64(k - 1)
		}
	}
	res.Unclaimed = int64(len(fx.issues) - len(st.claimed))
	// The server's view: no todo issue left in the phase's company.
	left, err := srv.api.client(srv.api.board).IssueList(ctx, fx.companyID, client.IssueListParams{Statuses: []clasp.IssueStatus{clasp.IssueTodo}, Limit: 1})
	if err != nil {
		m.fail(fmt.Errorf("list todo issues after the drain: %w", err))
	} else if len(left.Items) > 0 {
		m.fail(fmt.Errorf("issue %s is still todo after the drain", left.Items[0].ID))
	}
	res.Errors, res.Requests = m.errors.Load(), m.requests.Load()
	if s, ok := m.firstErr.Load().(string); ok {
		res.FirstErr = s
	}
	return res
}

// claimClient claims and finishes issues until the claim answers 204 (or
// ctx ends, or an answer other than 200, 204 or 409 comes), or deadline
// passes. It returns the ids it claimed, the latency of each op (claim
// plus PATCH), and whether the agent is done (204, or a failure).
func claimClient(ctx context.Context, a *api, ag benchAgent, run string, deadline time.Time, m *meter, conflicts *atomic.Int64) ([]string, []time.Duration, bool) {
	var ids []string
	lats := make([]time.Duration, 0, 1024)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		t0 := time.Now()
		st, b, err := a.do(ctx, http.MethodPost, claimPath, ag.key, run, claimBody, true)
		m.requests.Add(1)
		switch {
		case err == nil && st == http.StatusNoContent:
			return ids, lats, true
		case err == nil && st == http.StatusConflict:
			conflicts.Add(1)
			m.fail(errStatus("claim", st, b))
			continue
		case err != nil || st != http.StatusOK:
			m.fail(orStatus(err, "claim", st, b))
			return ids, lats, true
		}
		var iss struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(b, &iss); err != nil || iss.ID == "" {
			m.fail(fmt.Errorf("claim: answer without an issue id: %.200s", b))
			return ids, lats, true
		}
		ids = append(ids, iss.ID)
		m.first(time.Since(t0))
		st, b, err = a.do(ctx, http.MethodPatch, fmt.Sprintf(issuePath, iss.ID), ag.key, run, doneBody, false)
		m.requests.Add(1)
		if err != nil || st != http.StatusOK {
			m.fail(orStatus(err, "done", st, b))
			return ids, lats, true
		}
		lats = append(lats, time.Since(t0))
		m.ops.Add(1)
	}
	return ids, lats, ctx.Err() != nil
}
