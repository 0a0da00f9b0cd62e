package crashtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
	"github.com/clasp-dev/clasp/internal/serveproc"
)

// The stores every scenario of this package runs against.
const (
	backendSQLite   = "sqlite"
	backendPostgres = "postgres"
)

var backends = []string{backendSQLite, backendPostgres}

// postgresURL returns the URL of a fresh database (dropped at cleanup) on
// the server of CLASP_TEST_POSTGRES_URL. Without that variable the test is
// skipped, unless CI is set: then it fails (the PostgreSQL tests
// never skip silently in CI).
func postgresURL(t testing.TB, prefix string) string {
	t.Helper()
	admin := os.Getenv(serveproc.EnvTestPostgresURL)
	if admin == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set, and CI is: the PostgreSQL tests must run in CI (.ci/run starts a server)", serveproc.EnvTestPostgresURL)
		}
		t.Skipf("%s is not set: no PostgreSQL to test against (.ci/run starts one)", serveproc.EnvTestPostgresURL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u, drop, err := serveproc.CreateDatabase(ctx, admin, prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := drop(context.Background()); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return u
}

// serveArgs returns the `clasp serve` arguments that put a server on a
// fresh store of the named backend: a SQLite file in a temporary data
// directory, or a fresh PostgreSQL database (--database-url; the data
// directory then only holds the board token file).
func serveArgs(t testing.TB, backend, dbPrefix string) []string {
	t.Helper()
	args := []string{"--data-dir", filepath.Join(t.TempDir(), "data")}
	if backend == backendPostgres {
		args = append(args, "--database-url", postgresURL(t, dbPrefix))
	}
	return args
}

// syncBuffer is a bytes.Buffer safe for concurrent writes (server logs).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// tail returns the last n lines written.
func (b *syncBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	lines := strings.Split(strings.TrimRight(b.b.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// startServer starts `clasp serve` with args (see StartServer), kills it at
// cleanup, and prints the tail of its logs if the test failed.
func startServer(t *testing.T, args []string, log *syncBuffer) *serveproc.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := serveproc.StartServer(ctx, serveproc.ServerConfig{Binary: claspBin, Args: args, Log: log})
	if err != nil {
		t.Fatalf("%v\nserver log:\n%s", err, log.tail(40))
	}
	t.Cleanup(func() {
		srv.Kill()
		if t.Failed() {
			t.Logf("server log (%s, last lines):\n%s", srv.Addr(), log.tail(60))
		}
	})
	return srv
}

// newHTTPClient returns an HTTP client with its own connection pool (so a
// killed server's dead connections are never reused) and a per-request
// guard against a hung server.
func newHTTPClient() *http.Client {
	return &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), Timeout: time.Minute}
}

// randomPrefix returns an issue prefix: lead followed by random letters, 8
// letters in all.
func randomPrefix(lead string) string {
	b := []byte(lead)
	for len(b) < 8 {
		b = append(b, byte('A'+rand.IntN(26)))
	}
	return string(b)
}

// fixture is a company with agents, each with an API key and a live run.
type fixture struct {
	company *clasp.Company
	agents  []*clasp.Agent
	keys    []string     // API key per agent
	runs    []*clasp.Run // one running run per agent (with its RunToken)
	issues  []*clasp.Issue
}

// setUp creates a company, n agents with a key and an open run each, and
// nIssues todo issues (unassigned), through board.
func setUp(t testing.TB, ctx context.Context, board *client.Client, url string, hc *http.Client, n, nIssues int) *fixture {
	t.Helper()
	f := &fixture{}
	var err error
	f.company, err = board.CompanyCreate(ctx, client.CompanyCreateRequest{Name: "crash test " + t.Name(), IssuePrefix: randomPrefix("CT")})
	if err != nil {
		t.Fatalf("create company: %v", err)
	}
	for i := range n {
		a, err := board.AgentCreate(ctx, f.company.ID, client.AgentCreateRequest{Name: fmt.Sprintf("loader-%02d", i+1), Role: "load"})
		if err != nil {
			t.Fatalf("create agent: %v", err)
		}
		k, err := board.AgentKeyCreate(ctx, a.ID)
		if err != nil {
			t.Fatalf("create key: %v", err)
		}
		r, err := client.New(url, client.WithToken(k.Token), client.WithHTTPClient(hc)).RunOpen(ctx, client.RunOpenRequest{InvocationSource: "crashtest"})
		if err != nil {
			t.Fatalf("open run: %v", err)
		}
		f.agents, f.keys, f.runs = append(f.agents, a), append(f.keys, k.Token), append(f.runs, r)
	}
	for i := range nIssues {
		iss, err := board.IssueCreate(ctx, f.company.ID, client.IssueCreateRequest{Title: fmt.Sprintf("crash test issue %d", i+1), Status: clasp.IssueTodo})
		if err != nil {
			t.Fatalf("create issue: %v", err)
		}
		f.issues = append(f.issues, iss)
	}
	return f
}

// allIssues lists every issue of a company, by id.
func allIssues(ctx context.Context, c *client.Client, companyID string) (map[string]*clasp.Issue, error) {
	p, err := c.IssueList(ctx, companyID, client.IssueListParams{Limit: 1000})
	if err != nil {
		return nil, fmt.Errorf("list issues: %w", err)
	}
	all, err := p.All(ctx)
	if err != nil {
		return nil, fmt.Errorf("list issues: %w", err)
	}
	m := make(map[string]*clasp.Issue, len(all))
	for _, iss := range all {
		m[iss.ID] = iss
	}
	return m, nil
}

// allActivity lists every activity row of a company (or only those of
// action, when not ""), oldest first.
func allActivity(ctx context.Context, c *client.Client, companyID, action string) ([]*clasp.Activity, error) {
	p, err := c.CompanyActivity(ctx, companyID, client.ActivityListParams{Action: action, Limit: 1000})
	if err != nil {
		return nil, fmt.Errorf("list activity: %w", err)
	}
	all, err := p.All(ctx)
	if err != nil {
		return nil, fmt.Errorf("list activity: %w", err)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ID < all[j].ID })
	return all, nil
}

// lockDetails are the details of issue.checked_out, issue.released and
// issue.stale_lock_cleared rows.
type lockDetails struct {
	RunID                 string `json:"runId"`
	CheckoutEpoch         *int64 `json:"checkoutEpoch"`
	PreviousCheckoutRunID string `json:"previousCheckoutRunId"`
	ClearedCheckoutRunID  string `json:"clearedCheckoutRunId"`
}

func detailsOf(a *clasp.Activity) lockDetails {
	var d lockDetails
	_ = json.Unmarshal(a.Details, &d)
	return d
}

// runOf is the run an activity row names: details.runId, else its runId.
func runOf(a *clasp.Activity) string {
	if d := detailsOf(a); d.RunID != "" {
		return d.RunID
	}
	if a.RunID != nil {
		return *a.RunID
	}
	return ""
}

// statusTo reads the new status from an issue.updated row's details, or
// "". It accepts the team's format ({"changes": {"status": {"from": a,
// "to": b}}}) and the flat one ({"status": b}).
func statusTo(a *clasp.Activity) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(a.Details, &m) != nil {
		return ""
	}
	if ch, ok := m["changes"]; ok {
		var inner map[string]json.RawMessage
		if json.Unmarshal(ch, &inner) == nil {
			m = inner
		}
	}
	var plain string
	if json.Unmarshal(m["status"], &plain) == nil {
		return plain
	}
	var ft struct {
		To string `json:"to"`
	}
	_ = json.Unmarshal(m["status"], &ft)
	return ft.To
}

func str(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
