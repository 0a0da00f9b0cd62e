package postgres

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// batchEnv is a store with one company, its claimers (an agent and a
// running run each) and the test hooks.
type batchEnv struct {
	s    *testStore
	h    *store.TestHooks
	co   *clasp.Company
	runs []*clasp.Run
}

// newBatchEnv opens a store with a company and n claimers.
func newBatchEnv(t *testing.T, n int) *batchEnv {
	t.Helper()
	ctx := t.Context()
	s := openTest(t, Options{MaxConns: 8})
	board := store.Actor{Type: clasp.ActorBoard}
	co, err := s.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "Batch", IssuePrefix: "BAT", Actor: board})
	if err != nil {
		t.Fatal(err)
	}
	e := &batchEnv{s: s, h: store.NewTestHooks(s.DB), co: co}
	for i := range n {
		ag, err := s.AgentCreate(ctx, &store.AgentCreateParams{CompanyID: co.ID, Name: fmt.Sprintf("claimer-%02d", i), Role: "engineer", Actor: board})
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 32)
		rand.Read(b)
		sum := sha256.Sum256(b)
		r, err := s.RunOpen(ctx, &store.RunOpenParams{AgentID: ag.ID, InvocationSource: clasp.InvocationSelf, LeaseTTL: time.Hour,
			TokenHash: hex.EncodeToString(sum[:]), Actor: store.Actor{Type: clasp.ActorAgent, AgentID: ag.ID, CompanyID: co.ID}})
		if err != nil {
			t.Fatal(err)
		}
		e.runs = append(e.runs, r)
	}
	return e
}

// issues creates n unassigned todo issues of the company, priorities in
// turn, and returns their ids in claim order (priority, age, id).
func (e *batchEnv) issues(t *testing.T, n int) []string {
	t.Helper()
	prios := []clasp.Priority{clasp.PriorityLow, clasp.PriorityCritical, clasp.PriorityMedium, clasp.PriorityHigh}
	for i := range n {
		if _, err := e.s.IssueCreate(t.Context(), &store.IssueCreateParams{CompanyID: e.co.ID, Title: fmt.Sprintf("issue %d", i),
			Status: clasp.IssueTodo, Priority: prios[i%len(prios)], Actor: store.Actor{Type: clasp.ActorBoard}}); err != nil {
			t.Fatal(err)
		}
	}
	return e.claimOrder(t)
}

// claimOrder returns the ids of the company's unassigned issues in claim order.
func (e *batchEnv) claimOrder(t *testing.T) []string {
	t.Helper()
	rows, err := e.s.d.pool.Query(t.Context(), `SELECT id FROM issues WHERE company_id = $1 AND assignee_agent_id IS NULL
		ORDER BY priority_rank, created_at, id`, e.co.ID)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// claimCallResult is one claim of a batch: its run, request id, and what it got.
type claimCallResult struct {
	run     *clasp.Run
	request string
	iss     *clasp.Issue
	res     store.CheckoutResult
	err     error
}

// actor is the actor of the call: its run's agent in the run, with its request id.
func (c *claimCallResult) actor() store.Actor {
	return store.Actor{Type: clasp.ActorAgent, AgentID: c.run.AgentID, CompanyID: c.run.CompanyID, RunID: c.run.ID, RequestID: c.request}
}

// heldClaims holds the company's queue of claims of unassigned todo
// issues, starts a claim (scope unassigned) for each of runs, one after
// the other (each waits in the queue before the next starts: they arrive
// in the order of runs), runs meanwhile, lets them go (batches) and
// returns what each got. ctxs, when not nil, is each call's context.
func (e *batchEnv) heldClaims(t *testing.T, runs []*clasp.Run, ctxs []context.Context, meanwhile func(waiting func() int)) []*claimCallResult {
	t.Helper()
	waiting, release, err := e.h.HoldClaims(e.co.ID, []string{string(clasp.IssueTodo)})
	if err != nil {
		t.Fatal(err)
	}
	calls := make([]*claimCallResult, len(runs))
	var wg sync.WaitGroup
	for i, r := range runs {
		c := &claimCallResult{run: r, request: fmt.Sprintf("req-%02d-%s", i, r.ID[len(r.ID)-6:])}
		calls[i] = c
		ctx := t.Context()
		if ctxs != nil {
			ctx = ctxs[i]
		}
		wg.Go(func() {
			c.iss, c.err = e.s.IssueClaim(ctx, &store.IssueClaimParams{Scope: store.ClaimUnassigned, Actor: c.actor(), Result: &c.res})
		})
		for waiting() != i+1 {
			runtime.Gosched()
		}
	}
	if meanwhile != nil {
		meanwhile(waiting)
	}
	release()
	wg.Wait()
	return calls
}

// activityRow is an activity row of an issue, as stored.
type activityRow struct {
	id                         int64
	actorType, actorID, action string
	runID, requestID           *string
	details                    map[string]any
}

// activity returns the activity rows of issue id, oldest first.
func (e *batchEnv) activity(t *testing.T, id string) []activityRow {
	t.Helper()
	rows, err := e.s.d.pool.Query(t.Context(), `SELECT id, actor_type, actor_id, action, run_id, request_id, details FROM activity
		WHERE entity_id = $1 ORDER BY id`, id)
	if err != nil {
		t.Fatal(err)
	}
	var out []activityRow
	for rows.Next() {
		var (
			a   activityRow
			raw []byte
		)
		if err := rows.Scan(&a.id, &a.actorType, &a.actorID, &a.action, &a.runID, &a.requestID, &raw); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &a.details); err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// wantCheckedOut checks that call c's issue is held by its run at epoch
// 1 and that the issue's last activity rows are want (actions, oldest
// first), each carrying c's actor, run and request, the checked_out one
// naming c's agent and run.
func (e *batchEnv) wantCheckedOut(t *testing.T, c *claimCallResult, want ...string) {
	t.Helper()
	who := fmt.Sprintf("claim of run %s", c.run.ID)
	if c.iss.AssigneeAgentID == nil || *c.iss.AssigneeAgentID != c.run.AgentID || c.iss.CheckoutRunID == nil || *c.iss.CheckoutRunID != c.run.ID ||
		c.iss.ExecutionRunID == nil || *c.iss.ExecutionRunID != c.run.ID || c.iss.Status != clasp.IssueInProgress {
		t.Errorf("%s: answered issue %s with assignee %v, checkout %v, execution %v, status %s; want the run's agent and run, in_progress",
			who, c.iss.Identifier, deref(c.iss.AssigneeAgentID), deref(c.iss.CheckoutRunID), deref(c.iss.ExecutionRunID), c.iss.Status)
	}
	acts := e.activity(t, c.iss.ID)
	if len(acts) < len(want) {
		t.Fatalf("%s: issue %s has %d activity rows, want at least %d", who, c.iss.Identifier, len(acts), len(want))
	}
	acts = acts[len(acts)-len(want):]
	for i, a := range acts {
		if a.action != want[i] || a.actorType != string(clasp.ActorAgent) || a.actorID != c.run.AgentID ||
			deref(a.runID) != c.run.ID || deref(a.requestID) != c.request {
			t.Errorf("%s: activity %d of %s: %s by %s %s run %s request %s; want %s by agent %s run %s request %s", who, i, c.iss.Identifier,
				a.action, a.actorType, a.actorID, deref(a.runID), deref(a.requestID), want[i], c.run.AgentID, c.run.ID, c.request)
		}
	}
	last := acts[len(acts)-1].details
	if last["agentId"] != c.run.AgentID || last["runId"] != c.run.ID {
		t.Errorf("%s: issue.checked_out details %v, want agentId %s runId %s", who, last, c.run.AgentID, c.run.ID)
	}
}

// TestClaimBatchEachIssueOnce: claims of unassigned issues queued behind
// one in flight run as batches (more calls than one statement serves, so
// two batches) and every issue is claimed at most once: with more calls
// than issues every issue is claimed and the other calls get none (204);
// with fewer, every call is served, with the most urgent issues. Each
// served call's issue is held by its run at epoch 1, with one
// issue.checked_out carrying its own actor, run and request.
func TestClaimBatchEachIssueOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ calls, issues int }{{store.ClaimBatchMax + 6, 50}, {20, 30}} {
		t.Run(fmt.Sprintf("calls=%d,issues=%d", tc.calls, tc.issues), func(t *testing.T) {
			t.Parallel()
			e := newBatchEnv(t, tc.calls)
			order := e.issues(t, tc.issues)
			calls := e.heldClaims(t, e.runs, nil, nil)
			claimed := map[string]string{}
			none := 0
			for _, c := range calls {
				switch {
				case c.err != nil:
					t.Errorf("claim of run %s: %v", c.run.ID, c.err)
				case c.iss == nil:
					none++
				default:
					if prev, ok := claimed[c.iss.ID]; ok {
						t.Errorf("issue %s claimed by runs %s and %s", c.iss.Identifier, prev, c.run.ID)
					}
					claimed[c.iss.ID] = c.run.ID
					if c.iss.CheckoutEpoch != 1 || c.res.AdoptedWhy != "" {
						t.Errorf("claim of run %s: epoch %d adopted %q, want 1 and none", c.run.ID, c.iss.CheckoutEpoch, c.res.AdoptedWhy)
					}
					e.wantCheckedOut(t, c, clasp.ActionIssueCheckedOut)
					if n := len(e.activity(t, c.iss.ID)); n != 2 { // created, checked_out
						t.Errorf("issue %s: %d activity rows, want 2 (created, one checked_out)", c.iss.Identifier, n)
					}
				}
			}
			served := min(tc.calls, tc.issues)
			for i, c := range calls[:min(served, store.ClaimBatchMax)] { // one batch: call i gets the i-th issue in claim order
				if c.iss != nil && c.iss.ID != order[i] {
					t.Errorf("call %d (arrival order) got %s, want the %d-th issue in claim order %s", i, c.iss.ID, i, order[i])
				}
			}
			if len(claimed) != served || none != tc.calls-served {
				t.Errorf("%d calls on %d issues: %d served, %d answered none; want %d and %d", tc.calls, tc.issues, len(claimed), none, served, tc.calls-served)
			}
			for _, id := range order[:served] {
				if _, ok := claimed[id]; !ok {
					t.Errorf("issue %s (claim order) not claimed, want the %d most urgent claimed", id, served)
				}
			}
			if left := e.claimOrder(t); len(left) != tc.issues-served {
				t.Errorf("%d issues left unassigned, want %d", len(left), tc.issues-served)
			}
		})
	}
}

// TestClaimBatchCallerProblems: in one batch, a call whose run has
// finished gets 409 run_not_live, one whose run is gone 422
// run_not_found, one whose run's lease expired 409 run_not_live, and the
// other calls are served; none of the refused runs holds an issue.
func TestClaimBatchCallerProblems(t *testing.T) {
	t.Parallel()
	e := newBatchEnv(t, 6)
	e.issues(t, 10)
	ctx := t.Context()
	finished, missing, lost := e.runs[1], e.runs[3], e.runs[4]
	if err := e.h.SetRunStatus(ctx, finished.ID, clasp.RunSucceeded); err != nil {
		t.Fatal(err)
	}
	if err := e.h.DeleteRun(ctx, missing.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.h.ExpireRunLease(ctx, lost.ID); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{finished.ID: clasp.CodeRunNotLive, missing.ID: clasp.CodeRunNotFound, lost.ID: clasp.CodeRunNotLive}
	for _, c := range e.heldClaims(t, e.runs, nil, nil) {
		code, refused := want[c.run.ID]
		switch {
		case refused:
			if c.iss != nil || clasp.ErrorCode(c.err) != code {
				t.Errorf("claim of run %s: got %v, %v; want %s", c.run.ID, c.iss, c.err, code)
			}
		case c.err != nil || c.iss == nil:
			t.Errorf("claim of live run %s: got %v, %v; want an issue", c.run.ID, c.iss, c.err)
		default:
			e.wantCheckedOut(t, c, clasp.ActionIssueCheckedOut)
		}
	}
	if n := len(e.claimOrder(t)); n != 10-3 {
		t.Errorf("%d issues left unassigned, want 7 (3 claimed)", n)
	}
}

// TestClaimBatchCancelledWhileWaiting: a call whose context ends while it
// waits in the queue answers the context's error and is not claimed for;
// the other calls of the queue are served.
func TestClaimBatchCancelledWhileWaiting(t *testing.T) {
	t.Parallel()
	e := newBatchEnv(t, 4)
	e.issues(t, 10)
	gone, cancel := context.WithCancel(t.Context())
	ctxs := []context.Context{t.Context(), gone, t.Context(), t.Context()}
	calls := e.heldClaims(t, e.runs, ctxs, func(waiting func() int) {
		cancel()
		for waiting() != len(e.runs)-1 { // the cancelled call has left
			runtime.Gosched()
		}
	})
	for i, c := range calls {
		if i == 1 {
			if c.iss != nil || !errors.Is(c.err, context.Canceled) {
				t.Errorf("cancelled claim: got %v, %v; want context.Canceled and no issue", c.iss, c.err)
			}
			continue
		}
		if c.err != nil || c.iss == nil {
			t.Errorf("claim of run %s: got %v, %v; want an issue", c.run.ID, c.iss, c.err)
			continue
		}
		e.wantCheckedOut(t, c, clasp.ActionIssueCheckedOut)
	}
	var n int
	if err := e.s.d.pool.QueryRow(t.Context(), `SELECT count(*) FROM issues WHERE execution_run_id = $1 OR assignee_agent_id = $2`,
		e.runs[1].ID, e.runs[1].AgentID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("the cancelled call's run holds %d issues, want 0", n)
	}
}

// TestClaimBatchAdoptsDeadHolder: in a batch, the most urgent unassigned
// issue, held by a run that has failed, goes to the first call served
// with issue.checkout_lock_adopted (why terminal, the previous locks)
// then issue.checked_out, both with that call's actor, run and request,
// a new acquisition (epoch 1: the locks were written without a
// checkout); an issue held by a live run is never given out.
func TestClaimBatchAdoptsDeadHolder(t *testing.T) {
	t.Parallel()
	e := newBatchEnv(t, 5)
	ctx := t.Context()
	order := e.issues(t, 4) // order[0] critical
	holder, live := e.runs[3], e.runs[4]
	// The dead holder: run 3's execution lock on order[0], a todo issue
	// (L7 keeps a checkout lock to in_progress), and run 3 failed; live
	// run 4's on order[1].
	if err := e.h.ForceIssueLocks(ctx, order[0], clasp.IssueTodo, nil, nil, &holder.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.h.ForceIssueLocks(ctx, order[1], clasp.IssueTodo, nil, nil, &live.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.h.SetRunStatus(ctx, holder.ID, clasp.RunFailed); err != nil {
		t.Fatal(err)
	}
	calls := e.heldClaims(t, e.runs[:3], nil, nil)
	var adopter *claimCallResult
	for _, c := range calls {
		if c.err != nil || c.iss == nil {
			t.Fatalf("claim of run %s: got %v, %v; want an issue", c.run.ID, c.iss, c.err)
		}
		if c.iss.ID == order[1] {
			t.Errorf("claim of run %s took %s, held by live run %s", c.run.ID, c.iss.Identifier, live.ID)
		}
		if c.iss.ID == order[0] {
			adopter = c
		}
	}
	if adopter == nil {
		t.Fatalf("no call took the dead holder's issue %s", order[0])
	}
	if adopter.res.AdoptedWhy != "terminal" || adopter.iss.CheckoutEpoch != 1 {
		t.Errorf("adopting claim: AdoptedWhy %q epoch %d, want terminal and 1", adopter.res.AdoptedWhy, adopter.iss.CheckoutEpoch)
	}
	e.wantCheckedOut(t, adopter, clasp.ActionIssueLockAdopted, clasp.ActionIssueCheckedOut)
	acts := e.activity(t, order[0])
	adopted := acts[len(acts)-2].details
	if adopted["why"] != "terminal" || adopted["previousExecutionRunId"] != holder.ID || adopted["previousCheckoutRunId"] != nil {
		t.Errorf("issue.checkout_lock_adopted details %v, want why terminal, previous execution %s, no previous checkout", adopted, holder.ID)
	}
	for _, c := range calls {
		if c != adopter {
			e.wantCheckedOut(t, c, clasp.ActionIssueCheckedOut)
		}
	}
}

// TestClaimBatchOwnRunIssue: an unassigned issue whose execution lock
// names a call's own live run is eligible for that call only (L1/L3): in
// a batch where that call comes first, it still gets that issue, the most
// urgent it may take (as statement Claim gives it), and the next call
// gets the other issue, never the one naming a live run.
func TestClaimBatchOwnRunIssue(t *testing.T) {
	t.Parallel()
	e := newBatchEnv(t, 2)
	order := e.issues(t, 2) // order[0] critical, order[1] low
	own := e.runs[1]
	if err := e.h.ForceIssueLocks(t.Context(), order[0], clasp.IssueTodo, nil, nil, &own.ID); err != nil {
		t.Fatal(err)
	}
	calls := e.heldClaims(t, []*clasp.Run{own, e.runs[0]}, nil, nil)
	c := calls[0]
	if c.err != nil || c.iss == nil || c.iss.ID != order[0] {
		t.Fatalf("claim of run %s: got %v, %v; want the issue naming its run, %s", c.run.ID, c.iss, c.err, order[0])
	}
	if c.iss.CheckoutEpoch != 1 || c.res.AdoptedWhy != "" {
		t.Errorf("claim of its own run's issue: epoch %d adopted %q, want 1 and none", c.iss.CheckoutEpoch, c.res.AdoptedWhy)
	}
	e.wantCheckedOut(t, c, clasp.ActionIssueCheckedOut)
	if c := calls[1]; c.err != nil || c.iss == nil || c.iss.ID != order[1] {
		t.Errorf("claim of run %s: got %v, %v; want %s", c.run.ID, c.iss, c.err, order[1])
	}
}

// TestClaimBatchPlanUsesIndexes pins the plan of the batch statement over
// 20,000 issues, half of them assigned: the unassigned range is read
// through issues_claim_unassigned in order with LockRows (no Sort or scan
// of issues, no hashed read of every run), no Limit of the plan expects
// more than store.ClaimBatchMax rows (a limit the planner cannot see is
// costed as a tenth of the range, and in a company of a million issues that
// cost made PostgreSQL JIT-compile every batch), the statement's constant
// limit is store.ClaimBatchMax, and the statement gets a generic plan on a
// connection that runs it again and again.
func TestClaimBatchPlanUsesIndexes(t *testing.T) {
	t.Parallel()
	e := newBatchEnv(t, 2)
	ctx := t.Context()
	if _, err := e.s.d.pool.Exec(ctx, `INSERT INTO issues (id, company_id, identifier, title, status, priority, priority_rank, assignee_agent_id, created_at, updated_at)
		SELECT 'i' || g, $1, 'BAT-' || g, 't', CASE WHEN g % 4 = 0 THEN 'done' ELSE 'todo' END, 'medium', g % 4,
			CASE WHEN g % 2 = 0 THEN $2 END, now() - g * interval '1 second', now()
		FROM generate_series(1, 20000) g`, e.co.ID, e.runs[0].AgentID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.d.pool.Exec(ctx, `ANALYZE issues`); err != nil {
		t.Fatal(err)
	}
	args := namedArgs{"company": e.co.ID, "unassigned": []string{"todo"}, "runs": []string{"r1", "r2"}, "agents": []string{"a1", "a2"},
		"actor_types": []string{"agent", "agent"}, "actor_ids": []string{"a1", "a2"}, "actor_runs": []string{"r1", "r2"}, "actor_requests": []string{"", ""}}
	tx, err := e.s.d.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	text := explainPlan(ctx, t, tx, "ClaimBatch", args)
	if !strings.Contains(text, "issues_claim_unassigned") || !strings.Contains(text, "LockRows") {
		t.Errorf("batch claim plan lacks issues_claim_unassigned or LockRows:\n%s", text)
	}
	for _, bad := range []string{"Seq Scan on issues", "Seq Scan on runs", "hashed SubPlan"} {
		if strings.Contains(text, bad) {
			t.Errorf("batch claim plan has %q:\n%s", bad, text)
		}
	}
	limits := regexp.MustCompile(`Limit +\(cost=[0-9.]+\.\.[0-9.]+ rows=([0-9]+)`).FindAllStringSubmatch(text, -1)
	if len(limits) == 0 {
		t.Errorf("batch claim plan has no Limit:\n%s", text)
	}
	for _, m := range limits {
		if n, _ := strconv.Atoi(m[1]); n > store.ClaimBatchMax {
			t.Errorf("batch claim plan expects %d rows from a Limit, more than store.ClaimBatchMax (%d):\n%s", n, store.ClaimBatchMax, text)
		}
	}
	if want := fmt.Sprintf("LIMIT %d -- ClaimBatchMax", store.ClaimBatchMax); !strings.Contains(q("ClaimBatch"), want) {
		t.Errorf("statement ClaimBatch lacks %q: its constant limit and store.ClaimBatchMax differ", want)
	}
	conn, err := e.s.d.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for range 12 {
		rows, err := conn.Query(ctx, q("ClaimBatch"), args)
		if err != nil {
			t.Fatal(err)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	var generic int64
	if err := conn.QueryRow(ctx, `SELECT coalesce(sum(generic_plans), 0) FROM pg_prepared_statements WHERE statement LIKE '%WITH ORDINALITY AS c(run%'`).Scan(&generic); err != nil {
		t.Fatal(err)
	}
	if generic == 0 {
		t.Errorf("12 batch claims on one connection got no generic plan")
	}
	t.Logf("batch claim plan:\n%s", text)
}
