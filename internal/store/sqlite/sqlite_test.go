package sqlite

import (
	"context"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
	"github.com/clasp-dev/clasp/internal/store/storetest"
)

// TestContract runs the contract suite every store passes, on a fresh
// database file per test. synchronous=NORMAL: durability across power loss
// is not under test, and it keeps the suite fast (PRAGMA behaviour is
// TestOpenPragmasAndMigrations's).
func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) (store.Store, storetest.Hooks) {
		s := openTest(t, Options{Synchronous: "NORMAL"})
		return s, store.NewTestHooks(s.DB)
	})
}

// testStore is a store under test: the one implementation (store.DB) on
// a driver of this package, whose internals the tests reach through d.
type testStore struct {
	*store.DB
	d *Driver
}

func newTestStore(d *Driver) *testStore { return &testStore{DB: store.New(d), d: d} }

// openTest opens a store under test (see openTestDriver).
func openTest(tb testing.TB, opts Options) *testStore {
	tb.Helper()
	return newTestStore(openTestDriver(tb, opts))
}

// openTestDriver opens a driver on a fresh file in t.TempDir, closed at
// cleanup.
func openTestDriver(tb testing.TB, opts Options) *Driver {
	tb.Helper()
	s, err := Open(context.Background(), filepath.Join(tb.TempDir(), "data", "clasp.db"), opts)
	if err != nil {
		tb.Fatalf("setup: open store: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("close store: %v", err)
		}
	})
	return s
}

// fakeClock is a settable clock for Options.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestOpenPragmasAndMigrations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "nested", "dir", "clasp.db")
	for _, tc := range []struct {
		sync string
		want string // PRAGMA synchronous: 1 NORMAL, 2 FULL
	}{{"", "2"}, {"normal", "1"}, {"FULL", "2"}} {
		sDrv, err := Open(ctx, path, Options{Synchronous: tc.sync})
		if err != nil {
			t.Fatalf("open (synchronous %q): %v", tc.sync, err)
		}
		s := newTestStore(sDrv)
		for _, p := range []struct{ name, want string }{
			{"journal_mode", "wal"}, {"foreign_keys", "1"}, {"synchronous", tc.want}, {"busy_timeout", "10000"}, {"query_only", "0"},
			{"secure_delete", "0"}, // migration 002 turns it on for one statement only
		} {
			var got string
			if err := s.d.w.QueryRowContext(ctx, "PRAGMA "+p.name).Scan(&got); err != nil {
				t.Fatalf("writer PRAGMA %s: %v", p.name, err)
			}
			if got != p.want {
				t.Errorf("writer PRAGMA %s (synchronous %q): got %q, want %q", p.name, tc.sync, got, p.want)
			}
		}
		for _, p := range []struct{ name, want string }{{"query_only", "1"}, {"foreign_keys", "1"}, {"journal_mode", "wal"}} {
			var got string
			if err := s.d.r.QueryRowContext(ctx, "PRAGMA "+p.name).Scan(&got); err != nil {
				t.Fatalf("reader PRAGMA %s: %v", p.name, err)
			}
			if got != p.want {
				t.Errorf("reader PRAGMA %s: got %q, want %q", p.name, got, p.want)
			}
		}
		if _, err := s.d.r.ExecContext(ctx, "INSERT INTO settings (key, value) VALUES ('x', 'y')"); err == nil {
			t.Errorf("write through a reader connection: got nil error, want query_only refusal")
		}
		if v, err := s.SchemaVersion(ctx); err != nil || v != latestSchema {
			t.Errorf("SchemaVersion (synchronous %q): got %d, %v, want %d, nil", tc.sync, v, err, latestSchema)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
	}

	if _, err := Open(ctx, path, Options{Synchronous: "OFF"}); err == nil {
		t.Errorf("open with synchronous OFF: got nil error, want refusal")
	}
}

func TestMigrationsIdempotentOnReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "clasp.db")
	sDrv, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	s := newTestStore(sDrv)
	co, err := s.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "Acme", IssuePrefix: "ACME", Actor: board})
	if err != nil {
		t.Fatalf("create company: %v", err)
	}
	s.Close()

	sDrv, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	s = newTestStore(sDrv)
	defer s.Close()
	if v, err := s.SchemaVersion(ctx); err != nil || v != latestSchema {
		t.Errorf("SchemaVersion after reopen: got %d, %v, want %d, nil", v, err, latestSchema)
	}
	files, err := fs.Glob(migrations, "migration/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("migration files: %v, %v", files, err)
	}
	for _, f := range files {
		// Each file's version once; a number no file has (left to a
		// migration of another change) has no row.
		num, _, _ := strings.Cut(strings.TrimPrefix(f, "migration/"), "_")
		v, err := strconv.Atoi(num)
		if err != nil {
			t.Fatalf("migration file %s: %v", f, err)
		}
		var applied int
		if err := s.d.w.QueryRowContext(ctx, "SELECT count(*) FROM goose_db_version WHERE version_id = ?", v).Scan(&applied); err != nil || applied != 1 {
			t.Errorf("rows of version %d in goose_db_version: got %d, %v, want 1", v, applied, err)
		}
	}
	if got, err := s.CompanyGet(ctx, co.ID); err != nil || got.IssuePrefix != "ACME" {
		t.Errorf("company after reopen: got %+v, %v, want ACME", got, err)
	}
}

var board = store.Actor{Type: clasp.ActorBoard}

// latestSchema is the version of the newest file under migration/.
const latestSchema = 21 // 003_heartbeats, 004_claim, 005_idempotent_patch, 006_wake_request_hash, 007_agents_list_index, 008_companies_list_index, 009_issues_status_list_index, 010_instances, 011_key_name, 012_activity_request_id, 013_check_without_in_lists, 014_drop_checkout_run_index, 015_operators, 016_run_key, 017_dependencies, 018_gate, 019_relations_archive, 020_branch_template, 021_webhooks

// fixture is a company with agents A and B and one running run each.
type fixture struct {
	s      *testStore
	clock  *fakeClock
	co     *clasp.Company
	a, b   *clasp.Agent
	ra, rb *clasp.Run
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	clock := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	s := openTest(t, Options{Now: clock.Now})
	co, err := s.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "Acme", IssuePrefix: "ACME", Actor: board})
	if err != nil {
		t.Fatalf("setup: company: %v", err)
	}
	f := &fixture{s: s, clock: clock, co: co}
	f.a, f.ra = f.agentWithRun(t, "alpha")
	f.b, f.rb = f.agentWithRun(t, "beta")
	return f
}

func (f *fixture) agentWithRun(t *testing.T, name string) (*clasp.Agent, *clasp.Run) {
	t.Helper()
	ctx := context.Background()
	a, err := f.s.AgentCreate(ctx, &store.AgentCreateParams{CompanyID: f.co.ID, Name: name, Actor: board})
	if err != nil {
		t.Fatalf("setup: agent %s: %v", name, err)
	}
	return a, f.openRun(t, a)
}

func (f *fixture) openRun(t *testing.T, a *clasp.Agent) *clasp.Run {
	t.Helper()
	r, err := f.s.RunOpen(context.Background(), &store.RunOpenParams{AgentID: a.ID, LeaseTTL: time.Minute, Actor: agentOf(a, "")})
	if err != nil {
		t.Fatalf("setup: run of %s: %v", a.Name, err)
	}
	return r
}

func (f *fixture) issue(t *testing.T, status clasp.IssueStatus, assignee string) *clasp.Issue {
	t.Helper()
	iss, err := f.s.IssueCreate(context.Background(), &store.IssueCreateParams{CompanyID: f.co.ID, Title: "work", Status: status,
		AssigneeAgentID: assignee, Actor: board})
	if err != nil {
		t.Fatalf("setup: issue: %v", err)
	}
	return iss
}

func agentOf(a *clasp.Agent, runID string) store.Actor {
	return store.Actor{Type: clasp.ActorAgent, AgentID: a.ID, CompanyID: a.CompanyID, RunID: runID}
}

func (f *fixture) checkout(r *clasp.Run, ref string, expected ...clasp.IssueStatus) (*clasp.Issue, error) {
	return f.s.IssueCheckout(context.Background(), &store.IssueCheckoutParams{Ref: ref, AgentID: r.AgentID, ExpectedStatuses: expected,
		Actor: store.Actor{Type: clasp.ActorAgent, AgentID: r.AgentID, CompanyID: r.CompanyID, RunID: r.ID}})
}

func TestCheckoutAndConflict(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	iss := f.issue(t, clasp.IssueTodo, "")

	got, err := f.checkout(f.ra, iss.Identifier, clasp.IssueTodo)
	if err != nil {
		t.Fatalf("A's checkout: %v", err)
	}
	if got.Status != clasp.IssueInProgress || *got.CheckoutRunID != f.ra.ID || *got.ExecutionRunID != f.ra.ID || got.CheckoutEpoch != 1 ||
		*got.AssigneeAgentID != f.a.ID || *got.ExecutionAgentNameKey != "alpha" {
		t.Errorf("after checkout: got %+v, want in_progress held by A's run, epoch 1", got)
	}

	again, err := f.checkout(f.ra, iss.ID, clasp.IssueTodo) // L2
	if err != nil || again.CheckoutEpoch != 1 || !again.UpdatedAt.Equal(got.UpdatedAt) {
		t.Errorf("same-run retry: got %+v, %v, want the same row", again, err)
	}

	_, err = f.checkout(f.rb, iss.ID, clasp.IssueTodo)
	if e := clasp.AsError(err); e == nil || e.Code != clasp.CodeCheckoutConflict || e.Details["reason"] != clasp.ReasonAssignedToOtherAgent ||
		e.Details["checkoutRunId"] != f.ra.ID {
		t.Errorf("B's checkout: got %v, want checkout_conflict assigned_to_other_agent naming A's run", err)
	}

	ra2 := f.openRun(t, f.a)
	_, err = f.checkout(ra2, iss.ID, clasp.IssueTodo)
	if e := clasp.AsError(err); e == nil || e.Code != clasp.CodeCheckoutConflict || e.Details["reason"] != clasp.ReasonHeldByLiveRun {
		t.Errorf("A's second run: got %v, want checkout_conflict held_by_live_run", err)
	}

	// The first run's lease runs out: the second run adopts it at once (L3).
	f.clock.Add(2 * time.Minute)
	if _, err := f.s.RunTouch(context.Background(), &store.RunTouchParams{RunID: ra2.ID, AgentID: f.a.ID, LeaseTTL: time.Minute, Force: true}); err == nil {
		t.Fatalf("touch of a lapsed run: got nil error, want run_not_live")
	}
	ra3 := f.openRun(t, f.a)
	got, err = f.checkout(ra3, iss.ID, clasp.IssueTodo)
	if err != nil || got.CheckoutEpoch != 2 || *got.CheckoutRunID != ra3.ID {
		t.Fatalf("adoption of a lost holder: got %+v, %v, want held by the new run, epoch 2", got, err)
	}
	acts, _, err := f.s.ActivityList(context.Background(), &store.ActivityListParams{EntityID: iss.ID, Action: clasp.ActionIssueLockAdopted})
	if err != nil || len(acts) != 1 || string(acts[0].Details) != `{"previousCheckoutRunId":"`+f.ra.ID+`","previousExecutionRunId":"`+f.ra.ID+`","why":"lost"}` {
		t.Errorf("adoption activity: got %v, %v", acts, err)
	}
}

func TestConcurrentCheckoutOneWinner(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	iss := f.issue(t, clasp.IssueTodo, "")
	const n = 16
	runs := make([]*clasp.Run, n)
	for i := range runs {
		_, runs[i] = f.agentWithRun(t, "racer"+string(rune('a'+i)))
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { _, errs[i] = f.checkout(runs[i], iss.ID, clasp.IssueTodo) })
	}
	wg.Wait()
	wins := 0
	for i, err := range errs {
		switch clasp.ErrorCode(err) {
		case "":
			wins++
		case clasp.CodeCheckoutConflict:
		default:
			t.Errorf("run %d: got %v, want nil or checkout_conflict", i, err)
		}
	}
	if wins != 1 {
		t.Errorf("winners: got %d, want 1", wins)
	}
}

// TestSweepAndIdempotencyWindow: the sweeper's two passes, and an
// Idempotency-Key that is replayed within 24 hours and creates anew after
// (its expired record is replaced in the creating transaction).
func TestSweepAndIdempotencyWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	iss := f.issue(t, clasp.IssueTodo, "")
	if _, err := f.checkout(f.ra, iss.ID, clasp.IssueTodo); err != nil {
		t.Fatalf("checkout: %v", err)
	}
	create := func() (*clasp.Issue, bool) {
		t.Helper()
		p := &store.IdempotencyParams{ActorID: board.ID(), Key: "k1", RequestHash: "h1"}
		got, err := f.s.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: f.co.ID, Title: "once", Actor: board, Idempotency: p})
		if err != nil {
			t.Fatalf("create with k1: %v", err)
		}
		return got, p.Replayed
	}
	first, replayed := create()
	if replayed {
		t.Fatalf("first create: replayed, want created")
	}

	f.clock.Add(61 * time.Second) // both runs' leases lapse
	n, err := f.s.SweepExpiredRuns(ctx)
	if err != nil || n != 2 {
		t.Fatalf("pass 1: got %d, %v, want 2", n, err)
	}
	n, err = f.s.SweepStaleLocks(ctx)
	if err != nil || n != 1 {
		t.Fatalf("pass 2: got %d, %v, want 1", n, err)
	}
	if n, err = f.s.SweepStaleLocks(ctx); err != nil || n != 0 {
		t.Fatalf("second pass 2: got %d, %v, want 0", n, err)
	}

	f.clock.Add(23 * time.Hour)
	if again, replayed := create(); !replayed || again.ID != first.ID {
		t.Errorf("repeat after 23 h: got %s, replayed %v, want %s replayed", again.Identifier, replayed, first.Identifier)
	}
	f.clock.Add(time.Hour)
	if later, replayed := create(); replayed || later.ID == first.ID {
		t.Errorf("repeat after 24 h: got %s, replayed %v, want a new issue (the record expired)", later.Identifier, replayed)
	}
	var records int
	if err := f.s.d.w.QueryRowContext(ctx, "SELECT count(*) FROM idempotency_keys").Scan(&records); err != nil || records != 1 {
		t.Errorf("idempotency records: got %d, %v, want 1 (the expired one replaced)", records, err)
	}
}

func TestReleaseAndPatchRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)

	// L4: an unlocked issue assigned to A: B's release is refused, A's is a no-op.
	iss := f.issue(t, clasp.IssueTodo, f.a.ID)
	_, err := f.s.IssueRelease(ctx, &store.IssueReleaseParams{Ref: iss.ID, Actor: agentOf(f.b, f.rb.ID)})
	if got := clasp.ErrorCode(err); got != clasp.CodeOwnershipConflict {
		t.Errorf("B's release of A's unlocked issue: got %q (%v), want %q", got, err, clasp.CodeOwnershipConflict)
	}
	if got, err := f.s.IssueRelease(ctx, &store.IssueReleaseParams{Ref: iss.ID, Actor: agentOf(f.a, f.ra.ID)}); err != nil || !got.UpdatedAt.Equal(iss.UpdatedAt) {
		t.Errorf("A's release of its unlocked issue: got %+v, %v, want it unchanged", got, err)
	}

	// L6: the holder's PATCH to done with a comment clears both locks, sets
	// completedAt and writes the comment, in one transaction.
	if _, err := f.checkout(f.ra, iss.ID, clasp.IssueTodo); err != nil {
		t.Fatalf("checkout: %v", err)
	}
	done, comment := clasp.IssueDone, "result: 42"
	got, err := f.s.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: iss.Identifier, Status: &done, Comment: &comment, Actor: agentOf(f.a, f.ra.ID)})
	if err != nil {
		t.Fatalf("holder PATCH done: %v", err)
	}
	if got.Status != clasp.IssueDone || got.CheckoutRunID != nil || got.ExecutionRunID != nil || got.CompletedAt == nil || got.CheckoutEpoch != 1 {
		t.Errorf("after PATCH done: got %+v, want done, unlocked, completedAt set, epoch 1", got)
	}
	acts, _, err := f.s.ActivityList(ctx, &store.ActivityListParams{EntityID: iss.ID, Action: clasp.ActionIssueReleased})
	if err != nil || len(acts) != 1 {
		t.Fatalf("issue.released rows: got %d, %v, want 1", len(acts), err)
	}
	want := `{"previousCheckoutRunId":"` + f.ra.ID + `","previousExecutionRunId":"` + f.ra.ID + `","unassigned":false,"cause":"update"}`
	if string(acts[0].Details) != want {
		t.Errorf("issue.released details: got %s, want %s", acts[0].Details, want)
	}
	cs, err := f.s.CommentList(ctx, &store.CommentListParams{Ref: iss.ID})
	if err != nil || len(cs) != 1 || cs[0].Body != comment || *cs[0].RunID != f.ra.ID {
		t.Errorf("comments: got %+v, %v, want the result comment in A's run", cs, err)
	}

	// A bad cursor is bad input, not an internal error.
	if _, _, err := f.s.IssueList(ctx, &store.IssueListParams{CompanyID: f.co.ID, Page: store.Page{Cursor: "!!"}}); clasp.ErrorCode(err) != clasp.CodeInvalidRequest {
		t.Errorf("list with a bad cursor: got %v, want %s", err, clasp.CodeInvalidRequest)
	}
}
