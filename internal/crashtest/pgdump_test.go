package crashtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// pgTool finds a PostgreSQL program (pg_dump, pg_restore, initdb): in the
// newest /usr/lib/postgresql/*/bin (where .ci/run finds the server, so the
// versions match, and where the cluster tools sit side by side), else on
// PATH. Without it the test is skipped, or fails under CI (.ci/run
// installs PostgreSQL).
func pgTool(t *testing.T, name string) string {
	t.Helper()
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.Sort(dirs)
	for i := len(dirs) - 1; i >= 0; i-- {
		if p := filepath.Join(dirs[i], name); fileExists(p) {
			return p
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s not found on PATH or in /usr/lib/postgresql/*/bin, and CI is set", name)
	}
	t.Skipf("%s not found on PATH or in /usr/lib/postgresql/*/bin", name)
	return ""
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// TestPgDumpRestore is the PostgreSQL backup docs/backup.md describes,
// with the real binary: a server on PostgreSQL takes comments, checkouts
// (some left held) and releases; `pg_dump -Fc` dumps the database while the
// server runs; `pg_restore` loads the dump into a fresh database; a new
// server started on it (its data directory holding only the board token
// file) serves every write acknowledged before the dump, every issue
// satisfies L7, the held locks are still held by their runs, and the
// restored server takes a checkout.
func TestPgDumpRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real servers and pg_dump; skipped with -short")
	}
	ctx := t.Context()
	pgDump, pgRestore := pgTool(t, "pg_dump"), pgTool(t, "pg_restore")
	srcURL := postgresURL(t, "clasp_dump_src")
	dstURL := postgresURL(t, "clasp_dump_dst")
	srcDir := filepath.Join(t.TempDir(), "data")
	log := &syncBuffer{}
	srv := startServer(t, append([]string{"--data-dir", srcDir, "--database-url", srcURL, "--lease-ttl", "5m"}, unlimitedArgs...), log)
	hc := newHTTPClient()
	board := client.New(srv.URL(), client.WithToken(srv.BoardToken()), client.WithHTTPClient(hc))
	f := setUp(t, ctx, board, srv.URL(), hc, 3, 9)

	var comments []string
	held := map[string]string{} // issue id -> run id, of the locks left held
	for i, iss := range f.issues {
		a := i % len(f.agents)
		agent := client.New(srv.URL(), client.WithToken(f.runs[a].RunToken), client.WithHTTPClient(hc))
		if _, err := agent.IssueCheckout(ctx, iss.ID, client.CheckoutRequest{AgentID: f.agents[a].ID, ExpectedStatuses: []clasp.IssueStatus{clasp.IssueTodo}}); err != nil {
			t.Fatalf("checkout: %v", err)
		}
		c, err := agent.CommentCreate(ctx, iss.ID, client.CommentCreateRequest{Body: fmt.Sprintf("comment on %s", iss.Identifier)})
		if err != nil {
			t.Fatalf("comment: %v", err)
		}
		comments = append(comments, c.ID)
		if i%3 == 0 {
			held[iss.ID] = f.runs[a].ID
			continue
		}
		if _, err := agent.IssueRelease(ctx, iss.ID, client.ReleaseRequest{}); err != nil {
			t.Fatalf("release: %v", err)
		}
	}

	dump := filepath.Join(t.TempDir(), "clasp.dump")
	start := time.Now()
	if out, err := exec.CommandContext(ctx, pgDump, "-Fc", "--no-owner", "-f", dump, "-d", srcURL).CombinedOutput(); err != nil { // #nosec G204 -- pg_dump of the test's database
		t.Fatalf("pg_dump while the server runs: %v\n%s", err, out)
	}
	if out, err := exec.CommandContext(ctx, pgRestore, "--no-owner", "--exit-on-error", "-d", dstURL, dump).CombinedOutput(); err != nil { // #nosec G204 -- pg_restore into the test's fresh database
		t.Fatalf("pg_restore into a fresh database: %v\n%s", err, out)
	}
	t.Logf("pg_dump -Fc and pg_restore: %s", time.Since(start).Round(time.Millisecond))

	// The restored database on a new server; the board token file comes along.
	dstDir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(dstDir, 0o700); err != nil {
		t.Fatal(err)
	}
	tok, err := os.ReadFile(filepath.Join(srcDir, "board-token")) // #nosec G304 -- the test server's token file
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dstDir, "board-token"), tok, 0o600); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	log2 := &syncBuffer{}
	srv2 := startServer(t, append([]string{"--data-dir", dstDir, "--database-url", dstURL, "--lease-ttl", "5m"}, unlimitedArgs...), log2)
	board2 := client.New(srv2.URL(), client.WithToken(srv.BoardToken()), client.WithHTTPClient(hc))

	for _, iss := range f.issues {
		cs, err := board2.CommentList(ctx, iss.ID, client.CommentListParams{Limit: 1000})
		if err != nil {
			t.Fatalf("list comments on the restored database: %v", err)
		}
		for _, c := range cs {
			comments = slices.DeleteFunc(comments, func(id string) bool { return id == c.ID })
		}
	}
	if len(comments) > 0 {
		t.Errorf("acknowledged comments missing from the restored database: %v", comments)
	}
	issues := checkLocks(t, ctx, board2, f.company.ID, "after pg_restore")
	for id, run := range held {
		if iss := issues[id]; iss == nil || iss.CheckoutRunID == nil || *iss.CheckoutRunID != run {
			t.Errorf("issue %s was held by run %s at the dump; restored: %+v", id, run, iss)
		}
	}
	// A released issue is checked out again on the restored server.
	for i, iss := range f.issues {
		if _, ok := held[iss.ID]; ok {
			continue
		}
		a := i % len(f.agents)
		agent := client.New(srv2.URL(), client.WithToken(f.runs[a].RunToken), client.WithHTTPClient(hc))
		got, err := agent.IssueCheckout(ctx, iss.ID, client.CheckoutRequest{AgentID: f.agents[a].ID, ExpectedStatuses: []clasp.IssueStatus{issues[iss.ID].Status}})
		if err != nil {
			t.Fatalf("checkout on the restored database: %v", err)
		}
		if got.CheckoutEpoch != issues[iss.ID].CheckoutEpoch+1 {
			t.Errorf("checkout on the restored database: epoch %d, want %d", got.CheckoutEpoch, issues[iss.ID].CheckoutEpoch+1)
		}
		break
	}
	checkLocks(t, ctx, board2, f.company.ID, "after a checkout on the restored database")
}
