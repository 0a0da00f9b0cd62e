package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
	"github.com/clasp-dev/clasp/internal/cli"
	"github.com/clasp-dev/clasp/internal/mcp"
	"github.com/clasp-dev/clasp/internal/serveproc"
)

// world is one test's clasp server (the real `clasp serve`, in process) with
// a company, two agents with keys and a few todo issues.
type world struct {
	t      *testing.T
	url    string
	board  *client.Client
	co     *clasp.Company
	agents []*clasp.Agent
	keys   []string
	issues []*clasp.Issue
}

// stores runs fn on a fresh SQLite server and, when CLASP_TEST_POSTGRES_URL
// is set, on a fresh PostgreSQL database.
func stores(t *testing.T, fn func(t *testing.T, dbURL string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, "") })
	t.Run("postgres", func(t *testing.T) {
		admin := os.Getenv(serveproc.EnvTestPostgresURL)
		if admin == "" {
			t.Skip(serveproc.EnvTestPostgresURL + " is not set")
		}
		u, drop, err := serveproc.CreateDatabase(context.Background(), admin, "mcp_test")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = drop(context.Background()) })
		fn(t, u)
	})
}

// newWorld starts a server (lease TTL ttl, sweeps every 100 ms) and files
// nIssues todo issues.
func newWorld(t *testing.T, dbURL string, ttl time.Duration, nIssues int) *world {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan cli.ServeInfo, 1)
	served := make(chan error, 1)
	go func() {
		served <- cli.Serve(ctx, cli.ServeConfig{DataDir: t.TempDir(), DatabaseURL: dbURL, Listen: "127.0.0.1:0",
			LeaseTTL: ttl, SweepInterval: 100 * time.Millisecond}, ready)
	}()
	var info cli.ServeInfo
	select {
	case info = <-ready:
	case err := <-served:
		cancel()
		t.Fatalf("serve: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	w := &world{t: t, url: info.URL, board: client.New(info.URL, client.WithToken(info.BoardToken))}
	var err error
	if w.co, err = w.board.CompanyCreate(ctx, client.CompanyCreateRequest{Name: "Acme", IssuePrefix: "ACME"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"coder", "reviewer"} {
		a, err := w.board.AgentCreate(ctx, w.co.ID, client.AgentCreateRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		k, err := w.board.AgentKeyCreate(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		w.agents, w.keys = append(w.agents, a), append(w.keys, k.Token)
	}
	for i := range nIssues {
		iss, err := w.board.IssueCreate(ctx, w.co.ID, client.IssueCreateRequest{Title: fmt.Sprintf("task %d", i+1), Description: "do task " + fmt.Sprint(i+1), Status: clasp.IssueTodo})
		if err != nil {
			t.Fatal(err)
		}
		w.issues = append(w.issues, iss)
	}
	return w
}

// session connects an MCP client to a new session of cfg over the SDK's
// in-memory transports; the session is closed (its run finished
// succeeded) at cleanup.
func connect(t *testing.T, cfg mcp.Config) (*sdk.ClientSession, *mcp.Session) {
	t.Helper()
	sess := mcp.NewSession(cfg, mcp.Options{})
	srv := mcp.NewServer(sess)
	st, ct := sdk.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		_ = ss.Wait()
		_ = sess.Close(clasp.RunSucceeded)
	})
	return cs, sess
}

// agentSession is connect with agent n's key on w.
func (w *world) agentSession(n int) (*sdk.ClientSession, *mcp.Session) {
	return connect(w.t, mcp.Config{URL: w.url, Token: w.keys[n]})
}

// result is a tool answer: isError and the structured content.
type result struct {
	IsError bool
	Text    string
	S       map[string]any
}

func (r result) str(path ...string) string {
	var v any = r.S
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	if v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

func call(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) result {
	t.Helper()
	if args == nil {
		args = map[string]any{}
	}
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v", name, err)
	}
	r := result{IsError: res.IsError}
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*sdk.TextContent); ok {
			r.Text = tc.Text
		}
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &r.S); err != nil || r.S == nil {
		t.Fatalf("%s: no structured content (%s)", name, b)
	}
	if r.str("outcome") == "" || r.str("message") == "" {
		t.Fatalf("%s: answer without outcome or message: %s", name, b)
	}
	if !strings.HasPrefix(r.Text, r.str("message")) {
		t.Errorf("%s: text content does not start with the message: %q", name, r.Text)
	}
	return r
}

// eventually polls cond every 50 ms until it holds, failing after a minute
// (a guard against a hang, not a timing check).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within a minute", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
