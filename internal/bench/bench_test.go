package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/httpapi"
	"github.com/clasp-dev/clasp/internal/store"
	"github.com/clasp-dev/clasp/internal/store/sqlite"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // "" for valid; else a substring of the error
	}{
		{"defaults", Config{}, ""},
		{"all workloads", Config{Workloads: []string{"cycle", "contended", "mixed"}, Clients: []int{1, 64}, Issues: 65}, ""},
		{"claim", Config{Workloads: []string{"claim"}, Clients: []int{64}}, ""},
		{"unknown workload", Config{Workloads: []string{"burst"}}, `unknown workload "burst"`},
		{"zero clients", Config{Clients: []int{0}}, "clients 0"},
		{"too few issues", Config{Clients: []int{8}, Issues: 8}, "issues 8: want at least 9"},
		{"bad sync", Config{Sync: "off"}, `sync "off"`},
		{"local-trusted server, no token", Config{ServerURL: "http://127.0.0.1:1"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate(%+v): got %v, want nil", tc.cfg, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate(%+v): got %v, want an error containing %q", tc.cfg, err, tc.want)
			}
		})
	}
	if got := (Config{Workloads: []string{"claim"}}).withDefaults().Issues; got != DefaultClaimIssues {
		t.Errorf("claim run: default issues %d, want %d", got, DefaultClaimIssues)
	}
}

// TestRunInProcess runs every workload briefly against the in-process
// server, with the raw phases, and checks the report's shape: every phase
// did work without an unexpected answer, every contended round had one
// winner, and the cycle phases have their raw ratios.
func TestRunInProcess(t *testing.T) {
	t.Parallel()
	var progress bytes.Buffer
	rep, err := Run(context.Background(), Config{
		Workloads: []string{WorkloadCycle, WorkloadContended, WorkloadMixed},
		Clients:   []int{1, 3},
		Duration:  200 * time.Millisecond,
		Slice:     100 * time.Millisecond,
		Issues:    10,
		Sync:      "normal",
		DataDir:   t.TempDir(),
		Progress:  &progress,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	type row struct {
		Workload, Target, Sync string
		Clients                int
	}
	var got []row
	for _, r := range rep.Results {
		got = append(got, row{r.Workload, r.Target, r.Sync, r.Clients})
		if r.Ops == 0 || r.Errors != 0 || r.BadRounds != 0 || r.OpsPerS <= 0 || r.P99Ms < r.P50Ms {
			t.Errorf("%s %s clients=%d: got ops %d, errors %d (%s), bad rounds %d, p50 %.3f, p99 %.3f; want work without failures",
				r.Workload, r.Target, r.Clients, r.Ops, r.Errors, r.FirstErr, r.BadRounds, r.P50Ms, r.P99Ms)
		}
		if r.Target == TargetHTTP && r.Workload == WorkloadCycle && (r.Writes < 2*r.Ops || r.Commits == 0) {
			t.Errorf("cycle http clients=%d: got %d writes in %d commits for %d cycles, want at least two writes a cycle", r.Clients, r.Writes, r.Commits, r.Ops)
		}
	}
	want := []row{
		{"cycle", "http", "normal", 1}, {"cycle", "raw", "full", 1}, {"cycle", "raw", "normal", 1}, {"cycle", "limit", "full", 1}, {"cycle", "limit", "normal", 1},
		{"cycle", "http", "normal", 3}, {"cycle", "raw", "full", 3}, {"cycle", "raw", "normal", 3}, {"cycle", "limit", "full", 3}, {"cycle", "limit", "normal", 3},
		{"contended", "http", "normal", 1}, {"contended", "http", "normal", 3},
		{"mixed", "http", "normal", 1}, {"mixed", "http", "normal", 3},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("result rows (-want +got):\n%s", diff)
	}
	if len(rep.Ratios) != 2 || rep.Ratios[1].Clients != 3 || rep.Ratios[1].VsRawFull <= 0 || rep.Ratios[1].VsRawNorm <= 0 ||
		rep.Ratios[1].VsLimitFull <= 0 || rep.Ratios[1].VsLimitNormal <= 0 || rep.Ratios[1].RawFullVsLimitFull <= 0 || rep.Ratios[1].RawNormalVsLimitNormal <= 0 {
		t.Errorf("ratios: got %+v, want one per cycle client count, all positive", rep.Ratios)
	}

	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatalf("WriteTable: %v", err)
	}
	for _, s := range []string{"cycle clients=3: http (sync normal)", "x raw FULL", "cycle clients=3: http / limit = ", "raw / limit = ", "CPU s/1k ops", "op (contended):"} {
		if !strings.Contains(table.String(), s) {
			t.Errorf("table: missing %q in\n%s", s, table.String())
		}
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatalf("WriteJSON: %v", err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Results) != len(rep.Results) || back.Results[0].OpsPerS != rep.Results[0].OpsPerS {
		t.Errorf("JSON round trip: got %d results, %v; want %d", len(back.Results), err, len(rep.Results))
	}
	if !strings.Contains(progress.String(), "cycle clients=3") {
		t.Errorf("progress: got %q, want a line per phase", progress.String())
	}
}

// TestRunAgainstServerURL benches a server given by URL and board token:
// no raw phases then, and no store counters.
func TestRunAgainstServerURL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stDrv, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "clasp.db"), sqlite.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatalf("setup: open store: %v", err)
	}
	st := store.New(stDrv)
	defer st.Close()
	token, hash := httpapi.NewToken(httpapi.TokenBoard)
	if _, err := st.SettingPutIfAbsent(ctx, "board_token_hash", hash); err != nil {
		t.Fatalf("setup: board token: %v", err)
	}
	srv := httptest.NewServer(httpapi.New(httpapi.Config{Store: st, Logger: slog.New(slog.DiscardHandler)}).Handler())
	defer srv.Close()

	rep, err := Run(ctx, Config{Clients: []int{2}, Duration: 100 * time.Millisecond, Issues: 5, ServerURL: srv.URL, Token: token})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(rep.Results) != 1 || rep.Results[0].Target != TargetHTTP || rep.Results[0].Ops == 0 || rep.Results[0].Commits != 0 || len(rep.Ratios) != 0 {
		t.Errorf("results: got %+v, ratios %+v; want one http row with work, no store counters, no ratios", rep.Results, rep.Ratios)
	}
	if !strings.Contains(rep.CPUMeasures, "clients only") {
		t.Errorf("CPU measures: got %q, want it to say the server's CPU is not measured", rep.CPUMeasures)
	}
	srv.CloseClientConnections()
}

// TestContendedRoundsCountsBadRounds checks the contended workload's
// checker against a server that lets every checkout win.
func TestContendedRoundsCountsBadRounds(t *testing.T) {
	t.Parallel()
	var checkouts atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if strings.HasSuffix(r.URL.Path, "/checkout") {
			checkouts.Add(1)
		}
		w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	a := &api{hc: newHTTPClient(3), base: srv.URL}
	defer a.hc.CloseIdleConnections()
	agents := []benchAgent{{id: "a1", key: "k1"}, {id: "a2", key: "k2"}, {id: "a3", key: "k3"}}
	m := &meter{}
	bad := contendedRounds(context.Background(), a, "hot", agents, []string{"r1", "r2", "r3"}, time.Now(), m)
	if bad != 1 || m.ops.Load() != 0 || m.errors.Load() != 1 || checkouts.Load() != 3 {
		t.Errorf("one round where all 3 win: got %d bad rounds, %d ops, %d errors, %d checkouts; want 1, 0, 1, 3",
			bad, m.ops.Load(), m.errors.Load(), checkouts.Load())
	}
}

// TestInterleave runs turns in rounds: one with a budget gets slices of
// at most the slice until its budget is spent; one with a budget and a
// done predicate goes on in whole slices past its budget until done (a
// cycle beside a claim drain still running); one with only done (a
// drain) runs a slice per round until done. Rounds go on while any turn
// is not over, in the turns' order.
func TestInterleave(t *testing.T) {
	t.Parallel()
	var got []string
	rec := func(name string) runner {
		return func(_ context.Context, deadline time.Time, _ *meter) {
			got = append(got, fmt.Sprintf("%s %s", name, time.Until(deadline).Round(10*time.Millisecond)))
		}
	}
	drainTurns := 0
	drain := func(_ context.Context, deadline time.Time, m *meter) {
		drainTurns++
		rec("claim")(context.Background(), deadline, m)
	}
	turns := []turn{
		{run: rec("cycle"), m: &meter{}, budget: 250 * time.Millisecond, done: func() bool { return drainTurns >= 4 }},
		{run: rec("raw"), m: &meter{}, budget: 250 * time.Millisecond},
		{run: drain, m: &meter{}, done: func() bool { return drainTurns >= 4 }},
	}
	interleave(context.Background(), 100*time.Millisecond, turns)
	want := []string{
		"cycle 100ms", "raw 100ms", "claim 100ms",
		"cycle 100ms", "raw 100ms", "claim 100ms",
		"cycle 50ms", "raw 50ms", "claim 100ms",
		"cycle 100ms", "claim 100ms",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("turns (-want +got):\n%s", diff)
	}
}

// TestRunClaim drains issues with claim-next at two client counts in the
// turns of the cycle phase of each count, with filler issues seeded into
// every company: every issue is claimed exactly once, no claim is
// refused, no filler issue is claimed, the claim rows come after every
// cycle row, and each claim phase has its ratio to the cycle phase of its
// count.
func TestRunClaim(t *testing.T) {
	t.Parallel()
	rep, err := Run(context.Background(), Config{
		Workloads:  []string{WorkloadCycle, WorkloadClaim},
		Clients:    []int{1, 4},
		Duration:   100 * time.Millisecond,
		Issues:     60,
		SeedIssues: 12000, // two seed transactions per company
		Sync:       "normal",
		NoRaw:      true,
		DataDir:    t.TempDir(),
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var (
		claims []Result
		rows   []string
	)
	for _, r := range rep.Results {
		rows = append(rows, fmt.Sprintf("%s %s %d", r.Workload, r.Target, r.Clients))
		if r.Workload == WorkloadClaim {
			claims = append(claims, r)
		}
	}
	wantRows := []string{"cycle http 1", "cycle http-base 1", "cycle http 4", "cycle http-base 4",
		"claim http 1", "claim http-base 1", "claim http 4", "claim http-base 4"}
	if diff := cmp.Diff(wantRows, rows); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	if len(claims) != 4 {
		t.Fatalf("claim results: got %d, want 4 (seeded and baseline at 1 and 4 clients)", len(claims))
	}
	// A scale run: every phase also ran on the baseline, in the same turns.
	var scale []string
	for _, x := range rep.Scale {
		scale = append(scale, fmt.Sprintf("%s/%d %d vs %d", x.Workload, x.Clients, x.SeededIssues, x.BaseIssues))
		if x.P50Ratio <= 0 || x.P99Ratio <= 0 || x.FirstP50Ratio <= 0 {
			t.Errorf("scale %s clients=%d: ratios %+v, want all > 0", x.Workload, x.Clients, x)
		}
	}
	if diff := cmp.Diff([]string{"cycle/1 12060 vs 60", "cycle/4 12060 vs 60", "claim/1 12060 vs 60", "claim/4 12060 vs 60"}, scale); diff != "" {
		t.Errorf("scale comparisons (-want +got):\n%s", diff)
	}
	for _, r := range claims {
		if r.Ops != 60 || r.Conflicts != 0 || r.Duplicates != 0 || r.Unclaimed != 0 || r.Errors != 0 {
			t.Errorf("claim clients=%d: ops %d conflicts %d duplicates %d unclaimed %d errors %d (%s), want 60 ops and no problem",
				r.Clients, r.Ops, r.Conflicts, r.Duplicates, r.Unclaimed, r.Errors, r.FirstErr)
		}
	}
	var got []int
	for _, x := range rep.ClaimRatios {
		got = append(got, x.Clients)
		if x.Ratio <= 0 {
			t.Errorf("claim ratio at %d clients: %v, want > 0", x.Clients, x.Ratio)
		}
	}
	if diff := cmp.Diff([]int{1, 4}, got); diff != "" {
		t.Errorf("claim ratios' client counts (-want +got):\n%s", diff)
	}
}

// TestRunSeedAgents seeds filler agents alone (no filler issues): the
// seeded server's companies (the cycle one and the claim phase's) each get
// them, each with an unrevoked key and a finished run, the baseline none,
// and the run still reports both targets and their scale ratios.
func TestRunSeedAgents(t *testing.T) {
	t.Parallel()
	const seed = seedAgentBatch + 5 // two seed transactions per company
	dir := t.TempDir()
	var progress bytes.Buffer
	rep, err := Run(context.Background(), Config{
		Workloads:  []string{WorkloadCycle, WorkloadClaim},
		Clients:    []int{2},
		Duration:   100 * time.Millisecond,
		Issues:     10,
		SeedAgents: seed,
		Sync:       "normal",
		NoRaw:      true,
		DataDir:    dir,
		Progress:   &progress,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var got []string
	for _, r := range rep.Results {
		got = append(got, r.Workload+" "+r.Target)
	}
	if diff := cmp.Diff([]string{"cycle http", "cycle http-base", "claim http", "claim http-base"}, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	var scale []string
	for _, x := range rep.Scale {
		scale = append(scale, fmt.Sprintf("%s %d issues %d agents vs %d issues %d agents", x.Workload, x.SeededIssues, x.SeededAgents, x.BaseIssues, x.BaseAgents))
	}
	want := []string{
		fmt.Sprintf("cycle 10 issues %d agents vs 10 issues 2 agents", seed+2),
		fmt.Sprintf("claim 10 issues %d agents vs 10 issues 2 agents", seed+2),
	}
	if diff := cmp.Diff(want, scale); diff != "" {
		t.Errorf("scale comparisons (-want +got):\n%s", diff)
	}
	if !strings.Contains(progress.String(), fmt.Sprintf("%d/%d in", seed, seed)) {
		t.Errorf("progress: got %q, want the seed's last line", progress.String())
	}

	// Per database: companies with seed agents, and the agents, unrevoked
	// keys and finished runs of the seed.
	count := func(path string) []int {
		t.Helper()
		db, err := openSeedDB(path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var n [4]int
		err = db.QueryRow(`SELECT
			(SELECT count(DISTINCT company_id) FROM agents WHERE name LIKE 'seed-%'),
			(SELECT count(*) FROM agents WHERE name LIKE 'seed-%' AND status = 'active'),
			(SELECT count(*) FROM agent_api_keys k JOIN agents a ON a.id = k.agent_id
				WHERE a.name LIKE 'seed-%' AND k.revoked_at IS NULL AND k.prefix LIKE 'clasp_ak_%' AND length(k.token_hash) = 64),
			(SELECT count(*) FROM runs r JOIN agents a ON a.id = r.agent_id AND a.company_id = r.company_id
				WHERE a.name LIKE 'seed-%' AND r.status = 'succeeded' AND r.finished_at IS NOT NULL)`).Scan(&n[0], &n[1], &n[2], &n[3])
		if err != nil {
			t.Fatalf("count the seed in %s: %v", path, err)
		}
		return n[:]
	}
	if diff := cmp.Diff([]int{2, 2 * seed, 2 * seed, 2 * seed}, count(filepath.Join(dir, "server.db"))); diff != "" {
		t.Errorf("seeded server: companies, agents, keys, runs of the seed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{0, 0, 0, 0}, count(filepath.Join(dir, "server-base.db"))); diff != "" {
		t.Errorf("baseline server: companies, agents, keys, runs of the seed (-want +got):\n%s", diff)
	}
}

// TestRunPostgres runs a short cycle and claim on PostgreSQL, with the raw
// pgx limit and the claim drain in the cycle phase's turns, when CLASP_TEST_POSTGRES_URL names a database (skipped
// otherwise); the bench's schemas are dropped at the end.
func TestRunPostgres(t *testing.T) {
	url := os.Getenv("CLASP_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("CLASP_TEST_POSTGRES_URL not set")
	}
	t.Parallel()
	rep, err := Run(context.Background(), Config{
		Workloads:   []string{WorkloadCycle, WorkloadClaim},
		Clients:     []int{2},
		Duration:    200 * time.Millisecond,
		Slice:       100 * time.Millisecond,
		Issues:      20,
		DatabaseURL: url,
		DataDir:     t.TempDir(),
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var got []string
	for _, r := range rep.Results {
		got = append(got, r.Workload+" "+r.Target)
	}
	if diff := cmp.Diff([]string{"cycle http", "cycle raw", "cycle limit", "claim http"}, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	// The drain ran in the cycle phase's turns: the server's cycle had its
	// 200 ms at least, and the drain its own turns.
	if c, ok := find(rep.Results, WorkloadCycle, TargetHTTP, 2, ""); !ok || c.Seconds < 0.2 {
		t.Errorf("cycle http row: %+v, want at least 0.2 s of turns", c)
	}
	if c, ok := find(rep.Results, WorkloadClaim, TargetHTTP, 2, ""); !ok || c.Ops != 20 || c.Seconds <= 0 || c.Errors != 0 {
		t.Errorf("claim http row: %+v, want 20 issues drained in turns of their own, no error", c)
	}
	if len(rep.ClaimRatios) != 1 || rep.ClaimRatios[0].Ratio <= 0 {
		t.Errorf("claim ratios: %+v, want one", rep.ClaimRatios)
	}
	if len(rep.Ratios) != 1 || rep.Ratios[0].VsRawPostgres <= 0 || rep.Ratios[0].VsLimitPostgres <= 0 || rep.Ratios[0].RawVsLimitPostgres <= 0 {
		t.Errorf("ratios: %+v, want one with PostgreSQL raw and limit ratios", rep.Ratios)
	}
	if rep.DBCPUMeasures == "" {
		t.Errorf("report: no database CPU explanation, want the backends' /proc measure")
	}
}

// TestBackendCPU checks the database CPU probe on the PostgreSQL of
// CLASP_TEST_POSTGRES_URL (skipped when unset): a connection named by a
// fresh application_name burns CPU in its backend (a count over three
// million generated rows), and the probe finds that backend and counts
// CPU time for it; a name no backend has measures nothing.
func TestBackendCPU(t *testing.T) {
	url := os.Getenv("CLASP_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("CLASP_TEST_POSTGRES_URL not set")
	}
	t.Parallel()
	ctx := context.Background()
	mon, err := newPGMonitor(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer mon.close()
	app := newSchemaName("probe_test")
	conn, err := pgx.Connect(ctx, withAppName(url, app))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	p := mon.probe(app)
	start, ok := p.sample()
	if !ok || len(start) != 1 {
		t.Fatalf("sample: got %v, ok %v; want the one backend of %s", start, ok, app)
	}
	var n int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM generate_series(1, 3000000)").Scan(&n); err != nil || n != 3000000 {
		t.Fatalf("burn: %d, %v", n, err)
	}
	d, ok := p.since(start)
	if !ok || d <= 0 {
		t.Errorf("since: got %v, ok %v; want the backend's CPU of the count", d, ok)
	}
	none, ok := mon.probe(newSchemaName("nobody")).sample()
	if !ok || len(none) != 0 {
		t.Errorf("sample of a name no backend has: got %v, ok %v; want none", none, ok)
	}
}

// TestRunPostgresSeeded is a scale run on PostgreSQL (when
// CLASP_TEST_POSTGRES_URL names a database; skipped otherwise): filler
// issues and agents copied into the seeded server's schema, a baseline
// server in a schema of its own, both reported with their scale ratios.
func TestRunPostgresSeeded(t *testing.T) {
	url := os.Getenv("CLASP_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("CLASP_TEST_POSTGRES_URL not set")
	}
	t.Parallel()
	rep, err := Run(context.Background(), Config{
		Workloads:   []string{WorkloadCycle, WorkloadClaim},
		Clients:     []int{2},
		Duration:    100 * time.Millisecond,
		Issues:      10,
		SeedIssues:  seedPostgresBatch + 5, // two seed transactions per company
		SeedAgents:  30,
		NoRaw:       true,
		DatabaseURL: url,
		DataDir:     t.TempDir(),
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var got []string
	for _, r := range rep.Results {
		got = append(got, r.Workload+" "+r.Target)
	}
	if diff := cmp.Diff([]string{"cycle http", "cycle http-base", "claim http", "claim http-base"}, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	var scale []string
	for _, x := range rep.Scale {
		scale = append(scale, fmt.Sprintf("%s %d issues %d agents vs %d issues %d agents", x.Workload, x.SeededIssues, x.SeededAgents, x.BaseIssues, x.BaseAgents))
	}
	n := seedPostgresBatch + 5 + 10
	want := []string{fmt.Sprintf("cycle %d issues 32 agents vs 10 issues 2 agents", n), fmt.Sprintf("claim %d issues 32 agents vs 10 issues 2 agents", n)}
	if diff := cmp.Diff(want, scale); diff != "" {
		t.Errorf("scale comparisons (-want +got):\n%s", diff)
	}
}

// TestRetryLimitedStopped: a set-up call waiting out a rate limit when its
// context ends answers the context's error (the run was interrupted), not
// the 429 it was waiting out, so that an interrupted bench reports no
// error.
func TestRetryLimitedStopped(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := retryLimited(ctx, func() error {
		calls++
		cancel()
		return clasp.Errorf(clasp.CodeRateLimited, "Too many requests; retry after 1 s.").WithDetails("retryAfterSeconds", 1)
	})
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Errorf("retryLimited = %v after %d calls, want context.Canceled after 1", err, calls)
	}
	// Not limited: f's own answer, at once.
	want := clasp.Errorf(clasp.CodeNotFound, "No such company.")
	if err := retryLimited(context.Background(), func() error { return want }); err != want {
		t.Errorf("retryLimited = %v, want %v", err, want)
	}
}
