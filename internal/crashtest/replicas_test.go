package crashtest

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
	"github.com/clasp-dev/clasp/internal/serveproc"
)

// startReplicas starts n `clasp serve` processes with the same args (one
// PostgreSQL database) at the same time, and kills them at cleanup. Each
// logs to its own buffer.
func startReplicas(t testing.TB, n int, args []string) []*serveproc.Server {
	t.Helper()
	srvs := make([]*serveproc.Server, n)
	logs := make([]*syncBuffer, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		logs[i] = &syncBuffer{}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			srvs[i], errs[i] = serveproc.StartServer(ctx, serveproc.ServerConfig{Binary: claspBin, Args: args, Log: logs[i]})
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for i, s := range srvs {
			if s == nil {
				continue
			}
			s.Kill()
			if t.Failed() {
				t.Logf("replica %d (%s) log, last lines:\n%s", i+1, s.Addr(), logs[i].tail(30))
			}
		}
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("start replica %d: %v\nlog:\n%s", i+1, err, logs[i].tail(30))
		}
	}
	return srvs
}

// boardToken returns the board token one of the servers printed: the one
// that created it on the fresh database.
func boardToken(t testing.TB, srvs ...*serveproc.Server) string {
	t.Helper()
	for _, s := range srvs {
		if tok := s.BoardToken(); tok != "" {
			return tok
		}
	}
	t.Fatalf("no server printed a board token")
	return ""
}

// metric reads the value of an unlabelled counter from a server's
// /metrics.
func metric(ctx context.Context, hc *http.Client, url, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s/metrics has no %s", url, name)
}

// waitFor polls cond every 100 ms until it returns true or an error, or
// until a guard of 3 minutes (against a hung server, not a timing check).
func waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Parameters of TestReplicas_S23_ConcurrentSweepers.
const (
	sweepIssues = 1000
	sweepAgents = 10
)

// TestReplicas_S23_ConcurrentSweepers is scenario S23 across processes
// : 1,000 issues locked by runs whose lease has expired,
// then three `clasp serve` replicas on the one PostgreSQL database start at
// once with a 200 ms sweep interval, so their sweepers race over the stale
// locks. Every issue must be cleared exactly once: one
// issue.stale_lock_cleared row per issue, one run.lost per run, the
// replicas' clasp_sweep_locks_cleared_total summing to 1,000, and further
// passes on every replica clearing nothing.
func TestReplicas_S23_ConcurrentSweepers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real servers; skipped with -short")
	}
	args := serveArgs(t, backendPostgres, "clasp_s23")
	ctx := t.Context()

	// Set up through one server whose sweeper passes only at its start:
	// each agent's run checks out its share of the issues, renewing its
	// lease as it goes, then stops calling in.
	log := &syncBuffer{}
	setup := startServer(t, append(args, "--lease-ttl", "5s", "--sweep-interval", "1h"), log)
	token := setup.BoardToken()
	hc := newHTTPClient()
	defer hc.CloseIdleConnections()
	board := client.New(setup.URL(), client.WithToken(token), client.WithHTTPClient(hc))
	co, err := board.CompanyCreate(ctx, client.CompanyCreateRequest{Name: "sweep race", IssuePrefix: randomPrefix("SW")})
	if err != nil {
		t.Fatal(err)
	}
	issues := createIssues(t, ctx, board, co.ID, sweepIssues)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		runs []*clasp.Run
	)
	for a := range sweepAgents {
		wg.Go(func() {
			err := func() error {
				ag, err := board.AgentCreate(ctx, co.ID, client.AgentCreateRequest{Name: fmt.Sprintf("holder-%02d", a+1)})
				if err != nil {
					return err
				}
				key, err := board.AgentKeyCreate(ctx, ag.ID)
				if err != nil {
					return err
				}
				ac := client.New(setup.URL(), client.WithToken(key.Token), client.WithHTTPClient(hc))
				run, err := ac.RunOpen(ctx, client.RunOpenRequest{})
				if err != nil {
					return err
				}
				mu.Lock()
				runs = append(runs, run)
				mu.Unlock()
				rc := ac.WithToken(run.RunToken)
				for i := a; i < len(issues); i += sweepAgents {
					if _, err := rc.IssueCheckout(ctx, issues[i].ID, client.CheckoutRequest{AgentID: ag.ID, ExpectedStatuses: []clasp.IssueStatus{clasp.IssueTodo}}); err != nil {
						return fmt.Errorf("checkout %s: %w", issues[i].Identifier, err)
					}
				}
				return nil
			}()
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("set up %d locked issues: %v", sweepIssues, errs)
	}
	// The leases as the last checkouts renewed them.
	var lastLease time.Time
	for _, r := range runs {
		got, err := board.RunGet(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != clasp.RunRunning || got.LeaseExpiresAt == nil {
			t.Fatalf("run %s after setup: status %s, lease %v; want running with a lease", r.ID, got.Status, got.LeaseExpiresAt)
		}
		if got.LeaseExpiresAt.After(lastLease) {
			lastLease = *got.LeaseExpiresAt
		}
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	if err := setup.Stop(sctx); err != nil {
		t.Fatalf("stop the setup server: %v", err)
	}
	cancel()
	hc.CloseIdleConnections()

	// Wait until every lease has run out (the database's clock is this
	// machine's; a precondition, not a check), then start three replicas
	// at once: their sweepers pass at start and every 200 ms.
	time.Sleep(time.Until(lastLease.Add(500 * time.Millisecond)))

	srvs := startReplicas(t, 3, append(args, "--lease-ttl", "5s", "--sweep-interval", "200ms"))
	board = client.New(srvs[0].URL(), client.WithToken(token), client.WithHTTPClient(hc))

	waitFor(t, "the sweepers to clear every lock", func() (bool, error) {
		all, err := allIssues(ctx, board, co.ID)
		if err != nil {
			return false, err
		}
		for _, iss := range all {
			if iss.CheckoutRunID != nil || iss.ExecutionRunID != nil {
				return false, nil
			}
		}
		return true, nil
	})
	// Three more passes on every replica must clear nothing.
	passes := make([]float64, len(srvs))
	for i, s := range srvs {
		if passes[i], err = metric(ctx, hc, s.URL(), "clasp_sweeps_total"); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "three more sweeps on every replica", func() (bool, error) {
		for i, s := range srvs {
			n, err := metric(ctx, hc, s.URL(), "clasp_sweeps_total")
			if err != nil || n < passes[i]+3 {
				return false, err
			}
		}
		return true, nil
	})

	cleared, expired := 0.0, 0.0
	var perReplica []string
	for i, s := range srvs {
		c, err := metric(ctx, hc, s.URL(), "clasp_sweep_locks_cleared_total")
		if err != nil {
			t.Fatal(err)
		}
		e, err := metric(ctx, hc, s.URL(), "clasp_sweep_runs_expired_total")
		if err != nil {
			t.Fatal(err)
		}
		cleared, expired = cleared+c, expired+e
		perReplica = append(perReplica, fmt.Sprintf("replica %d: %v locks, %v runs", i+1, c, e))
	}
	t.Logf("cleared by the replicas' sweepers: %s", strings.Join(perReplica, "; "))
	if cleared != sweepIssues || expired != sweepAgents {
		t.Errorf("the replicas' sweepers cleared %v locks and expired %v runs in all; want %d and %d", cleared, expired, sweepIssues, sweepAgents)
	}

	stale, err := allActivity(ctx, board, co.ID, clasp.ActionIssueStaleLockCleared)
	if err != nil {
		t.Fatal(err)
	}
	perIssue := map[string]int{}
	for _, a := range stale {
		perIssue[a.EntityID]++
	}
	for _, iss := range issues {
		if n := perIssue[iss.ID]; n != 1 {
			t.Errorf("%s: %d issue.stale_lock_cleared rows, want exactly 1", iss.Identifier, n)
		}
	}
	if len(stale) != sweepIssues {
		t.Errorf("%d issue.stale_lock_cleared rows, want %d", len(stale), sweepIssues)
	}
	lost, err := allActivity(ctx, board, co.ID, clasp.ActionRunLost)
	if err != nil {
		t.Fatal(err)
	}
	perRun := map[string]int{}
	for _, a := range lost {
		perRun[a.EntityID]++
	}
	for _, r := range runs {
		if n := perRun[r.ID]; n != 1 {
			t.Errorf("run %s: %d run.lost rows, want exactly 1", r.ID, n)
		}
	}
	for _, r := range runs {
		got, err := board.RunGet(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != clasp.RunFailed || got.ErrorCode == nil || *got.ErrorCode != "lease_expired" {
			t.Errorf("run %s: status %s, errorCode %s; want failed, lease_expired", r.ID, got.Status, str(got.ErrorCode))
		}
	}
	final, err := allIssues(ctx, board, co.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, iss := range final {
		if iss.CheckoutEpoch != 1 {
			t.Errorf("%s: checkoutEpoch %d, want 1", iss.Identifier, iss.CheckoutEpoch)
		}
	}
}

// createIssues creates n todo issues in a company, 8 at a time, and
// returns them in identifier order.
func createIssues(t *testing.T, ctx context.Context, board *client.Client, companyID string, n int) []*clasp.Issue {
	t.Helper()
	out := make([]*clasp.Issue, n)
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range next {
				out[i], errs[i] = board.IssueCreate(ctx, companyID, client.IssueCreateRequest{Title: fmt.Sprintf("issue %d", i+1), Status: clasp.IssueTodo})
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("create issue: %v", err)
		}
	}
	sort.Slice(out, func(i, j int) bool { return identNumber(out[i].Identifier) < identNumber(out[j].Identifier) })
	return out
}

// identNumber is N of PREFIX-N, or -1.
func identNumber(ident string) int {
	_, num, ok := strings.Cut(ident, "-")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(num)
	if err != nil {
		return -1
	}
	return n
}

// TestReplicas_GaplessIdentifiers is S27 across processes (item
// 3): three replicas on one PostgreSQL database create 60 issues of one
// company at the same moment (20 concurrent requests each, released
// together), and the identifiers are PREFIX-1..PREFIX-60 without gap or
// repeat.
func TestReplicas_GaplessIdentifiers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real servers; skipped with -short")
	}
	args := serveArgs(t, backendPostgres, "clasp_ids")
	ctx := t.Context()
	srvs := startReplicas(t, 3, args)
	token := boardToken(t, srvs...)
	hc := newHTTPClient()
	defer hc.CloseIdleConnections()
	boards := make([]*client.Client, len(srvs))
	for i, s := range srvs {
		boards[i] = client.New(s.URL(), client.WithToken(token), client.WithHTTPClient(hc))
	}
	co, err := boards[0].CompanyCreate(ctx, client.CompanyCreateRequest{Name: "identifiers across replicas", IssuePrefix: randomPrefix("ID")})
	if err != nil {
		t.Fatal(err)
	}

	const n = 60
	got := make([]string, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			iss, err := boards[i%len(boards)].IssueCreate(ctx, co.ID, client.IssueCreateRequest{Title: fmt.Sprintf("issue from replica %d, request %d", i%len(boards)+1, i)})
			errs[i] = err
			if err == nil {
				got[i] = iss.Identifier
			}
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("create %d (replica %d): %v", i, i%len(boards)+1, err)
		}
	}
	seen := map[string]int{}
	for _, id := range got {
		seen[id]++
	}
	for k := 1; k <= n; k++ {
		id := fmt.Sprintf("%s-%d", co.IssuePrefix, k)
		if seen[id] != 1 {
			t.Errorf("%s answered %d times, want exactly once", id, seen[id])
		}
		delete(seen, id)
	}
	for id, c := range seen {
		t.Errorf("unexpected identifier %q answered %d times (want %s-1..%s-%d)", id, c, co.IssuePrefix, co.IssuePrefix, n)
	}
	listed, err := allIssues(ctx, boards[1], co.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != n {
		t.Errorf("%d issues listed, want %d", len(listed), n)
	}
	for _, iss := range listed {
		if k := identNumber(iss.Identifier); k < 1 || k > n {
			t.Errorf("listed identifier %s out of 1..%d", iss.Identifier, n)
		}
	}
}
