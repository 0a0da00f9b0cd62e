package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
	"github.com/clasp-dev/clasp/internal/store"
	"github.com/clasp-dev/clasp/internal/store/sqlite"
)

// DefaultClaimIssues is how many issues the claim workload drains per
// phase when Config.Issues is not set (issue 5: 10,000).
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
// API would write), else through the API.
func setupClaim(ctx context.Context, srv *target, n, issues, seed int) (*claimFixture, error) {
	board := srv.api.client(srv.api.board)
	co, err := board.CompanyCreate(ctx, client.CompanyCreateRequest{Name: "clasp bench claim", IssuePrefix: "C" + randomLetters(7)})
	if err != nil {
		return nil, fmt.Errorf("bench: claim: create company: %w", err)
	}
	fx := &claimFixture{companyID: co.ID, agents: make([]benchAgent, n), issues: make(map[string]bool, issues)}
	err = parallel(ctx, n, 8, func(ctx context.Context, i int) error {
		ag, err := board.AgentCreate(ctx, co.ID, client.AgentCreateRequest{Name: fmt.Sprintf("claim-%d", i), Role: "bench"})
		if err != nil {
			return fmt.Errorf("create agent: %w", err)
		}
		key, err := board.AgentKeyCreate(ctx, ag.ID)
		if err != nil {
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
		iss, err := board.IssueCreate(ctx, co.ID, client.IssueCreateRequest{Title: title, Status: clasp.IssueTodo})
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
	if seed > 0 {
		if err := seedFiller(ctx, srv.dbPath, co.ID, seed); err != nil {
			return nil, err
		}
	}
	return fx, nil
}

// runClaimPhase drains a fresh set of issues with n agents (setupClaim):
// each agent's run claims (POST /api/agents/me/claim, scope unassigned),
// then sets the issue done (PATCH status done, which clears its locks),
// until the claim answers 204. One op = one claim plus its PATCH. It
// checks that no claim was refused (Result.Conflicts counts the 409s),
// that every issue was claimed exactly once (Result.Duplicates,
// Result.Unclaimed) and that no todo issue is left in the company.
func runClaimPhase(ctx context.Context, srv *target, n, issues, seed int, pr *progress) (Result, error) {
	fx, err := setupClaim(ctx, srv, n, issues, seed)
	if err != nil {
		return Result{}, err
	}
	runs, finish, err := openRuns(ctx, srv.api, fx.agents)
	if err != nil {
		return Result{}, err
	}
	defer finish()

	m := &meter{}
	var (
		conflicts atomic.Int64
		mu        sync.Mutex
		claimed   = make(map[string]int, issues)
	)
	stop := pr.watch(fmt.Sprintf("claim clients=%d", n), 0, gauge{"http", m})
	var w0 sqlite.WriteStats
	if srv.stats != nil {
		w0 = srv.stats()
	}
	m.begin()
	clientLoop(fx.agents, runs, m, func(i int, ag benchAgent, run string) []time.Duration {
		ids, lats := claimClient(ctx, srv.api, ag, run, m, &conflicts)
		mu.Lock()
		for _, id := range ids {
			claimed[id]++
		}
		mu.Unlock()
		return lats
	})
	m.end()
	stop()

	res := m.result(WorkloadClaim, TargetHTTP, n)
	res.Sync = srv.sync
	if srv.stats != nil {
		w := srv.stats()
		res.Writes, res.Commits = w.Writes-w0.Writes, w.Commits-w0.Commits
	}
	res.Conflicts = conflicts.Load()
	for id, k := range claimed {
		if _, ok := fx.issues[id]; !ok {
			m.fail(fmt.Errorf("claimed issue %s is not one of the phase's", id))
			continue
		}
		if k > 1 {
			res.Duplicates += int64(k - 1)
		}
	}
	res.Unclaimed = int64(len(fx.issues) - len(claimed))
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
	return res, ctx.Err()
}

// claimClient claims and finishes issues until the claim answers 204 (or
// ctx ends, or an answer other than 200, 204 or 409 comes). It returns the
// ids it claimed and the latency of each op (claim plus PATCH).
func claimClient(ctx context.Context, a *api, ag benchAgent, run string, m *meter, conflicts *atomic.Int64) ([]string, []time.Duration) {
	var ids []string
	lats := make([]time.Duration, 0, 1024)
	for ctx.Err() == nil {
		t0 := time.Now()
		st, b, err := a.do(ctx, http.MethodPost, claimPath, ag.key, run, claimBody, true)
		m.requests.Add(1)
		switch {
		case err == nil && st == http.StatusNoContent:
			return ids, lats
		case err == nil && st == http.StatusConflict:
			conflicts.Add(1)
			m.fail(errStatus("claim", st, b))
			continue
		case err != nil || st != http.StatusOK:
			m.fail(orStatus(err, "claim", st, b))
			return ids, lats
		}
		var iss struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(b, &iss); err != nil || iss.ID == "" {
			m.fail(fmt.Errorf("claim: answer without an issue id: %.200s", b))
			return ids, lats
		}
		ids = append(ids, iss.ID)
		m.first(time.Since(t0))
		st, b, err = a.do(ctx, http.MethodPatch, fmt.Sprintf(issuePath, iss.ID), ag.key, run, doneBody, false)
		m.requests.Add(1)
		if err != nil || st != http.StatusOK {
			m.fail(orStatus(err, "done", st, b))
			return ids, lats
		}
		lats = append(lats, time.Since(t0))
		m.ops.Add(1)
	}
	return ids, lats
}
