package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
	"github.com/clasp-dev/clasp/internal/store/storetest"
)

// envURL names the PostgreSQL server the tests use (.ci/run starts a
// throwaway one and sets it).
const envURL = "CLASP_TEST_POSTGRES_URL"

// testURL returns the test server's URL. Without one the test fails in CI
// (env CI set: PostgreSQL tests never skip silently there) and is skipped
// elsewhere.
func testURL(tb testing.TB) string {
	tb.Helper()
	url := os.Getenv(envURL)
	if url == "" {
		if os.Getenv("CI") != "" {
			tb.Fatalf("%s is required in CI (.ci/run starts PostgreSQL and sets it)", envURL)
		}
		tb.Skipf("%s is not set: skipping the PostgreSQL store tests (run .ci/run, or start PostgreSQL and set it to a postgres:// URL)", envURL)
	}
	return url
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

// openTestDriver opens a driver in a fresh schema clasp_test_<random> of
// the test server, closed and dropped at cleanup.
func openTestDriver(tb testing.TB, opts Options) *Driver {
	tb.Helper()
	return openTestURL(tb, testURL(tb), opts)
}

// openTestURL is openTest on the server at url.
func openTestURL(tb testing.TB, url string, opts Options) *Driver {
	tb.Helper()
	ctx := context.Background()
	b := make([]byte, 6)
	rand.Read(b)
	opts.Schema = "clasp_test_" + hex.EncodeToString(b)
	if opts.MaxConns == 0 {
		opts.MaxConns = 8
	}
	s, err := Open(ctx, url, opts)
	if err != nil {
		tb.Fatalf("setup: open store: %v", err)
	}
	tb.Cleanup(func() {
		s.Close()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			tb.Errorf("cleanup: connect: %v", err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{opts.Schema}.Sanitize()+" CASCADE"); err != nil {
			tb.Errorf("cleanup: drop schema %s: %v", opts.Schema, err)
		}
	})
	return s
}

// TestContract runs the contract suite every store passes, each test on a
// store in its own fresh schema.
// TestConnectionsRunWithoutJIT checks the pool's connections start with jit
// off (the store's statements are index reads of a few rows, and JIT
// compilation of one costs more CPU than the statement), and that a jit
// setting in the URL is kept.
func TestConnectionsRunWithoutJIT(t *testing.T) {
	t.Parallel()
	base := testURL(t)
	for _, tc := range []struct{ param, want string }{{"", "off"}, {"jit=on", "on"}} {
		url := base
		if tc.param != "" {
			sep := "?"
			if strings.Contains(url, "?") {
				sep = "&"
			}
			url += sep + tc.param
		}
		s := openTestURL(t, url, Options{MaxConns: 2})
		var got string
		if err := s.pool.QueryRow(t.Context(), "SHOW jit").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("URL parameter %q: SHOW jit = %q, want %q", tc.param, got, tc.want)
		}
	}
}

func TestContract(t *testing.T) {
	testURL(t)
	storetest.Run(t, func(t *testing.T) (store.Store, storetest.Hooks) {
		s := openTest(t, Options{})
		return s, store.NewTestHooks(s.DB)
	})
}

// Replicas starting at the same moment on a new schema: every Open
// succeeds, the schema is migrated once (one goose row for version 1), and
// a reopen applies nothing and keeps the data.
func TestOpenConcurrentMigrations(t *testing.T) {
	t.Parallel()
	first := openTest(t, Options{}) // creates, migrates and drops the schema at cleanup
	schema := first.d.schema
	first.Close()
	conn, err := pgx.Connect(context.Background(), testURL(t))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		t.Fatalf("drop schema: %v", err)
	}

	const replicas = 4
	stores := make([]*Driver, replicas)
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Go(func() { stores[i], errs[i] = Open(t.Context(), testURL(t), Options{Schema: schema, MaxConns: 2}) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: open: %v", i, err)
		}
		defer stores[i].Close()
	}
	var rows int
	if err := stores[0].pool.QueryRow(t.Context(), "SELECT count(*) FROM goose_db_version WHERE version_id = 1").Scan(&rows); err != nil || rows != 1 {
		t.Errorf("rows of version 1 in goose_db_version: got %d, %v, want 1", rows, err)
	}
	co, err := store.New(stores[1]).CompanyCreate(t.Context(), &store.CompanyCreateParams{Name: "Acme", IssuePrefix: "ACME", Actor: board})
	if err != nil {
		t.Fatalf("create company on replica 1: %v", err)
	}
	if got, err := store.New(stores[2]).CompanyGet(t.Context(), co.ID); err != nil || got.IssuePrefix != "ACME" {
		t.Errorf("company on replica 2: got %+v, %v, want ACME", got, err)
	}
	again, err := Open(t.Context(), testURL(t), Options{Schema: schema})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer again.Close()
	if v, err := again.SchemaVersion(t.Context()); err != nil || v != 19 { // 002_heartbeats, 003_claim, 004_idempotent_patch, 005_wake_request_hash, 006_companies_list_index, 007_issues_status_list_index, 008_instances, 009_key_name, 010_activity_request_id, 011_assignee_status_assigned, 012_issues_autovacuum, 013_operators, 014_run_key, 015_dependencies, 016_gate, 017_relations_archive, 018_branch_template, 019_webhooks
		t.Errorf("SchemaVersion after reopen: got %d, %v, want 19, nil", v, err)
	}
}

// Per-company identifiers stay gapless when the creators are separate
// stores (replicas, each with its own pool) and some creates fail: a
// refused create (an assignee of another company) takes no number.
func TestIdentifiersAcrossReplicas(t *testing.T) {
	t.Parallel()
	a := openTest(t, Options{})
	bDrv, err := Open(t.Context(), testURL(t), Options{Schema: a.d.schema})
	if err != nil {
		t.Fatalf("open second replica: %v", err)
	}
	b := newTestStore(bDrv)
	defer b.Close()
	ctx := t.Context()
	co, err := a.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "Acme", IssuePrefix: "ACME", Actor: board})
	if err != nil {
		t.Fatal(err)
	}
	other, err := a.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "Other", IssuePrefix: "OTHER", Actor: board})
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := a.AgentCreate(ctx, &store.AgentCreateParams{CompanyID: other.ID, Name: "stranger", Actor: board})
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	idents := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			s, assignee := a, ""
			if i%2 == 1 {
				s = b
			}
			if i%5 == 0 {
				assignee = stranger.ID // refused: 422, no number taken
			}
			iss, err := s.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: co.ID, Title: "t", AssigneeAgentID: assignee, Actor: board})
			errs[i] = err
			if err == nil {
				idents[i] = iss.Identifier
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for i := range n {
		if i%5 == 0 {
			if code := clasp.ErrorCode(errs[i]); code != clasp.CodePreconditionFailed {
				t.Errorf("create %d with another company's assignee: got %v, want %s", i, errs[i], clasp.CodePreconditionFailed)
			}
			continue
		}
		if errs[i] != nil {
			t.Fatalf("create %d: %v", i, errs[i])
		}
		seen[idents[i]] = true
	}
	want := n - n/5
	for k := 1; k <= want; k++ {
		if id := "ACME-" + strconv.Itoa(k); !seen[id] {
			t.Errorf("identifier %s missing (got %d identifiers: %v)", id, len(seen), seen)
		}
	}
	if len(seen) != want {
		t.Errorf("distinct identifiers: got %d, want %d", len(seen), want)
	}
}
