package storetest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// leaseTTL is the lease of runs opened by the fixtures: long enough that no
// run of the suite expires by itself; tests expire leases with
// Hooks.ExpireRunLease.
const leaseTTL = time.Hour

// lockActions are the activity actions written by lock changes (rule L7:
// every lock change has exactly one activity row).
var lockActions = []string{
	clasp.ActionIssueCheckedOut,
	clasp.ActionIssueLockAdopted,
	clasp.ActionIssueReleased,
	clasp.ActionIssueLockReleased,
	clasp.ActionIssueStaleLockCleared,
	clasp.ActionIssueForceRelease,
	clasp.ActionIssueEscalated,
}

// env is the usual bundle of a test: a fresh store, its hooks, a company
// ACME and two agents of it, alpha (A) and beta (B).
type env struct {
	st   store.Store
	h    Hooks
	co   *clasp.Company
	a, b *clasp.Agent
}

// newEnv opens a fresh store and creates company ACME with agents alpha and beta.
func newEnv(t *testing.T, open opener) *env {
	t.Helper()
	st, h := open(t)
	co := newCompany(t, st, "ACME")
	return &env{st: st, h: h, co: co, a: newAgent(t, st, co.ID, "alpha"), b: newAgent(t, st, co.ID, "beta")}
}

// newCompany creates a company with the given issue prefix (2-10 upper-case letters).
func newCompany(t *testing.T, st store.Store, prefix string) *clasp.Company {
	t.Helper()
	c, err := st.CompanyCreate(t.Context(), &store.CompanyCreateParams{Name: "Company " + prefix, IssuePrefix: prefix, Actor: boardActor()})
	if err != nil {
		t.Fatalf("setup: create company %s: %v", prefix, err)
	}
	return c
}

// newAgent creates an active agent named name in the company.
func newAgent(t *testing.T, st store.Store, companyID, name string) *clasp.Agent {
	t.Helper()
	a, err := st.AgentCreate(t.Context(), &store.AgentCreateParams{CompanyID: companyID, Name: name, Role: "engineer", Actor: boardActor()})
	if err != nil {
		t.Fatalf("setup: create agent %s: %v", name, err)
	}
	return a
}

// openRun opens a running run of agent a with a one-hour lease.
func openRun(t *testing.T, st store.Store, a *clasp.Agent) *clasp.Run {
	t.Helper()
	return openRunTTL(t, st, a, leaseTTL)
}

// openRunTTL opens a running run of agent a whose lease is ttl from now.
func openRunTTL(t *testing.T, st store.Store, a *clasp.Agent, ttl time.Duration) *clasp.Run {
	t.Helper()
	r, err := st.RunOpen(t.Context(), runOpenParams(a, ttl))
	if err != nil {
		t.Fatalf("setup: open run of %s: %v", a.Name, err)
	}
	return r
}

func runOpenParams(a *clasp.Agent, ttl time.Duration) *store.RunOpenParams {
	return &store.RunOpenParams{
		AgentID:          a.ID,
		InvocationSource: clasp.InvocationSelf,
		LeaseTTL:         ttl,
		TokenHash:        newTokenHash(),
		Actor:            agentActor(a),
	}
}

// newIssue creates an issue of the company with the given status and
// assignee ("" for none), priority medium.
func newIssue(t *testing.T, st store.Store, companyID string, status clasp.IssueStatus, assigneeID string) *clasp.Issue {
	t.Helper()
	return newIssueP(t, st, companyID, status, clasp.PriorityMedium, assigneeID)
}

// newIssueP is newIssue with a priority.
func newIssueP(t *testing.T, st store.Store, companyID string, status clasp.IssueStatus, prio clasp.Priority, assigneeID string) *clasp.Issue {
	t.Helper()
	b := make([]byte, 4)
	rand.Read(b)
	title := "issue " + hex.EncodeToString(b)
	iss, err := st.IssueCreate(t.Context(), &store.IssueCreateParams{
		CompanyID:       companyID,
		Title:           title,
		Status:          status,
		Priority:        prio,
		AssigneeAgentID: assigneeID,
		Actor:           boardActor(),
	})
	if err != nil {
		t.Fatalf("setup: create issue (status %s, assignee %q): %v", status, assigneeID, err)
	}
	return iss
}

// newTokenHash returns the hex SHA-256 of a fresh random secret.
func newTokenHash() string {
	b := make([]byte, 32)
	rand.Read(b)
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// boardActor is the board (a human operator; never carries a run).
func boardActor() store.Actor { return store.Actor{Type: clasp.ActorBoard} }

// agentActor is agent a acting outside any run.
func agentActor(a *clasp.Agent) store.Actor {
	return store.Actor{Type: clasp.ActorAgent, AgentID: a.ID, CompanyID: a.CompanyID}
}

// runActor is the agent of run r acting in r.
func runActor(r *clasp.Run) store.Actor {
	return store.Actor{Type: clasp.ActorAgent, AgentID: r.AgentID, CompanyID: r.CompanyID, RunID: r.ID}
}

// checkout is run r's checkout of ref (rule L1) with the given expected statuses.
func checkout(ctx context.Context, st store.Store, r *clasp.Run, ref string, expected ...clasp.IssueStatus) (*clasp.Issue, error) {
	return st.IssueCheckout(ctx, &store.IssueCheckoutParams{Ref: ref, AgentID: r.AgentID, ExpectedStatuses: expected, LeaseTTL: leaseTTL, Actor: runActor(r)})
}

// mustCheckout is checkout that fails the test on error.
func mustCheckout(t *testing.T, st store.Store, r *clasp.Run, ref string, expected ...clasp.IssueStatus) *clasp.Issue {
	t.Helper()
	iss, err := checkout(t.Context(), st, r, ref, expected...)
	if err != nil {
		t.Fatalf("checkout of %s by run %s: got error %v, want nil", ref, r.ID, err)
	}
	return iss
}

// checkoutResult is mustCheckout that also returns what the store reported
// in IssueCheckoutParams.Result.
func checkoutResult(t *testing.T, st store.Store, r *clasp.Run, ref string, expected ...clasp.IssueStatus) (*clasp.Issue, store.CheckoutResult) {
	t.Helper()
	var res store.CheckoutResult
	iss, err := st.IssueCheckout(t.Context(), &store.IssueCheckoutParams{Ref: ref, AgentID: r.AgentID, ExpectedStatuses: expected,
		LeaseTTL: leaseTTL, Actor: runActor(r), Result: &res})
	if err != nil {
		t.Fatalf("checkout of %s by run %s: got error %v, want nil", ref, r.ID, err)
	}
	return iss, res
}

// release is a release of ref by actor (rule L4).
func release(ctx context.Context, st store.Store, actor store.Actor, ref string, unassign bool) (*clasp.Issue, error) {
	return st.IssueRelease(ctx, &store.IssueReleaseParams{Ref: ref, Unassign: unassign, Actor: actor})
}

// finish ends run r with status as its own agent.
func finish(ctx context.Context, st store.Store, r *clasp.Run, status clasp.RunStatus) (*clasp.Run, error) {
	return st.RunFinish(ctx, &store.RunFinishParams{RunID: r.ID, Status: status, Actor: runActor(r)})
}

// getIssue reads an issue unscoped, failing the test on error.
func getIssue(t *testing.T, st store.Store, ref string) *clasp.Issue {
	t.Helper()
	iss, err := st.IssueGet(t.Context(), "", ref)
	if err != nil {
		t.Fatalf("get issue %s: %v", ref, err)
	}
	return iss
}

// getRun reads a run, failing the test on error.
func getRun(t *testing.T, st store.Store, id string) *clasp.Run {
	t.Helper()
	r, err := st.RunGet(t.Context(), id)
	if err != nil {
		t.Fatalf("get run %s: %v", id, err)
	}
	return r
}

// lockState is the part of an issue that the lock rules change.
type lockState struct {
	Status       clasp.IssueStatus
	Assignee     string
	CheckoutRun  string
	ExecutionRun string
	Epoch        int64
}

func lockOf(iss *clasp.Issue) lockState {
	return lockState{
		Status:       iss.Status,
		Assignee:     deref(iss.AssigneeAgentID),
		CheckoutRun:  deref(iss.CheckoutRunID),
		ExecutionRun: deref(iss.ExecutionRunID),
		Epoch:        iss.CheckoutEpoch,
	}
}

// wantLock compares the lock state of iss with want.
func wantLock(t *testing.T, what string, iss *clasp.Issue, want lockState) {
	t.Helper()
	if iss == nil {
		t.Errorf("%s: got nil issue, want %+v", what, want)
		return
	}
	if diff := cmp.Diff(want, lockOf(iss)); diff != "" {
		t.Errorf("%s: lock state mismatch (-want +got):\n%s", what, diff)
	}
}

// held is the lock state of an issue that run runID of agent agentID holds.
func held(agentID, runID string, epoch int64) lockState {
	return lockState{Status: clasp.IssueInProgress, Assignee: agentID, CheckoutRun: runID, ExecutionRun: runID, Epoch: epoch}
}

// checkL7 checks invariant L7 on one issue: checkoutRunId set implies status
// in_progress and executionRunId equal to it.
func checkL7(t *testing.T, what string, iss *clasp.Issue) {
	t.Helper()
	if err := l7Violation(iss); err != "" {
		t.Errorf("%s: L7 violated on %s: %s", what, iss.Identifier, err)
	}
}

func l7Violation(iss *clasp.Issue) string {
	if iss.CheckoutRunID == nil {
		return ""
	}
	if iss.Status != clasp.IssueInProgress {
		return fmt.Sprintf("checkoutRunId %s set with status %s, want in_progress", *iss.CheckoutRunID, iss.Status)
	}
	if deref(iss.ExecutionRunID) != *iss.CheckoutRunID {
		return fmt.Sprintf("executionRunId %q, want checkoutRunId %q", deref(iss.ExecutionRunID), *iss.CheckoutRunID)
	}
	return ""
}

// wantUnchanged checks that the issue's row equals before.
func wantUnchanged(t *testing.T, what string, st store.Store, before *clasp.Issue) {
	t.Helper()
	after := getIssue(t, st, before.ID)
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("%s: issue changed (-before +after):\n%s", what, diff)
	}
}

// wantCode checks that err carries the clasp error code want ("" for nil).
func wantCode(t *testing.T, what string, err error, want string) {
	t.Helper()
	if got := clasp.ErrorCode(err); got != want {
		t.Errorf("%s: got code %q (err %v), want %q", what, got, err, want)
	}
}

// conflictKeys are the details of a 409 checkout_conflict (rule L1).
var conflictKeys = []string{"issueId", "status", "assigneeAgentId", "checkoutRunId", "executionRunId", "reason"}

// wantConflict checks that err is a 409 checkout_conflict whose details have
// all of conflictKeys, with the values in want ("" for null).
func wantConflict(t *testing.T, what string, err error, want map[string]string) {
	t.Helper()
	if got := clasp.ErrorCode(err); got != clasp.CodeCheckoutConflict {
		t.Errorf("%s: got code %q (err %v), want %q", what, got, err, clasp.CodeCheckoutConflict)
		return
	}
	e := clasp.AsError(err)
	got := map[string]string{}
	for _, k := range conflictKeys {
		v, ok := e.Details[k]
		if !ok {
			t.Errorf("%s: conflict details %v: key %q missing", what, e.Details, k)
			continue
		}
		got[k] = asString(v)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: conflict details[%q] got %q, want %q", what, k, got[k], w)
		}
	}
}

// asString renders a details value: "" for nil (or a nil pointer), the
// pointed-to or underlying string for string kinds, fmt otherwise.
func asString(v any) string {
	if v == nil {
		return ""
	}
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface {
		if rv.IsNil() {
			return ""
		}
		rv = rv.Elem()
	}
	if rv.Kind() == reflect.String {
		return rv.String()
	}
	if f, ok := rv.Interface().(float64); ok && f == float64(int64(f)) {
		return fmt.Sprint(int64(f))
	}
	return fmt.Sprint(rv.Interface())
}

// allActivity lists every activity row matching p, newest first, following cursors.
func allActivity(t *testing.T, st store.Store, p store.ActivityListParams) []*clasp.Activity {
	t.Helper()
	p.Page = store.Page{Limit: 1000}
	var out []*clasp.Activity
	for range 10000 {
		rows, next, err := st.ActivityList(t.Context(), &p)
		if err != nil {
			t.Fatalf("list activity %+v: %v", p, err)
		}
		out = append(out, rows...)
		if next == "" {
			return out
		}
		p.Page.Cursor = next
	}
	t.Fatalf("list activity %+v: cursor never ends", p)
	return nil
}

// issueActivity lists the activity rows of one issue with the given action
// ("" for all).
func (e *env) issueActivity(t *testing.T, issueID, action string) []*clasp.Activity {
	t.Helper()
	return allActivity(t, e.st, store.ActivityListParams{CompanyID: e.co.ID, EntityID: issueID, Action: action})
}

// lockCounts counts the lock-change activity rows of one issue by action.
func lockCounts(t *testing.T, st store.Store, companyID, issueID string) map[string]int {
	t.Helper()
	got := map[string]int{}
	for _, a := range allActivity(t, st, store.ActivityListParams{CompanyID: companyID, EntityID: issueID}) {
		for _, la := range lockActions {
			if a.Action == la {
				got[la]++
			}
		}
	}
	return got
}

// wantLockActivity checks the exact number of lock-change activity rows of
// an issue per action (actions absent from want must have none).
func (e *env) wantLockActivity(t *testing.T, what, issueID string, want map[string]int) {
	t.Helper()
	got := lockCounts(t, e.st, e.co.ID, issueID)
	for k, v := range want {
		if v == 0 {
			delete(want, k)
		}
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("%s: lock activity counts mismatch (-want +got):\n%s", what, diff)
	}
}

// details decodes an activity row's details object.
func details(t *testing.T, a *clasp.Activity) map[string]any {
	t.Helper()
	m := map[string]any{}
	if len(a.Details) == 0 {
		return m
	}
	if err := json.Unmarshal(a.Details, &m); err != nil {
		t.Fatalf("activity %d (%s) details %s: not a JSON object: %v", a.ID, a.Action, a.Details, err)
	}
	return m
}

// wantDetails checks some keys of an activity row's details ("" for null or absent).
func wantDetails(t *testing.T, what string, a *clasp.Activity, want map[string]string) {
	t.Helper()
	d := details(t, a)
	for k, w := range want {
		if got := asString(d[k]); got != w {
			t.Errorf("%s: %s details[%q] got %q, want %q (details %s)", what, a.Action, k, got, w, a.Details)
		}
	}
}

// oneActivity returns the single activity row of an issue with action,
// failing the test if there is not exactly one.
func (e *env) oneActivity(t *testing.T, issueID, action string) *clasp.Activity {
	t.Helper()
	rows := e.issueActivity(t, issueID, action)
	if len(rows) != 1 {
		t.Fatalf("%s rows of issue %s: got %d, want 1", action, issueID, len(rows))
	}
	return rows[0]
}

// race runs fn(0..n-1) in n goroutines released together from a barrier
// and waits for all of them.
func race(n int, fn func(i int)) {
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			fn(i)
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
}

// scale returns full, or small with -short or under the race detector: the
// size of a test's heaviest loop (rounds, issues, operations).
func scale(full, small int) int {
	if testing.Short() || raceEnabled {
		return small
	}
	return full
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func ptr[T any](v T) *T { return &v }
