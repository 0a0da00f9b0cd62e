package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startServer runs Serve on a free loopback port with its data in dataDir
// until the test ends (or stop is called) and returns what it announced.
func startServer(t *testing.T, dataDir string) (info ServeInfo, banner *syncBuffer, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	banner = &syncBuffer{}
	ready := make(chan ServeInfo, 1)
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ServeConfig{DataDir: dataDir, Listen: "127.0.0.1:0", Stdout: banner}, ready)
	}()
	select {
	case info = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("Serve: %v", err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve after shutdown: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return info, banner, stop
}

func TestServeBoardToken(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")

	// First start: the token is created, printed once and written 0600.
	info, banner, stop := startServer(t, dir)
	if !strings.HasPrefix(info.BoardToken, "clasp_bt_") {
		t.Fatalf("BoardToken = %q, want clasp_bt_...", info.BoardToken)
	}
	out := banner.String()
	for _, want := range []string{"board token: " + info.BoardToken + "\n", "clasp listening on " + info.URL + "\n", info.BoardTokenFile} {
		if !strings.Contains(out, want) {
			t.Errorf("banner lacks %q:\n%s", want, out)
		}
	}
	fi, err := os.Stat(info.BoardTokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("board token file mode = %v, want 0600", fi.Mode().Perm())
	}
	b, _ := os.ReadFile(info.BoardTokenFile)
	if strings.TrimSpace(string(b)) != info.BoardToken {
		t.Errorf("board token file holds %q, want the printed token", b)
	}
	if info.SchemaVersion < 1 {
		t.Errorf("SchemaVersion = %d, want >= 1", info.SchemaVersion)
	}

	// The token is the board's credential.
	ctx := context.Background()
	c := client.New(info.URL, client.WithToken(info.BoardToken))
	if err := c.Readyz(ctx); err != nil {
		t.Fatalf("readyz: %v", err)
	}
	if _, err := c.CompanyCreate(ctx, client.CompanyCreateRequest{Name: "Acme", IssuePrefix: "ACME"}); err != nil {
		t.Fatalf("company create with the board token: %v", err)
	}
	if _, err := c.WithToken("").CompanyList(ctx, client.ListParams{}); clasp.ErrorCode(err) != clasp.CodeUnauthenticated {
		t.Errorf("company list without a token: %v, want unauthenticated", err)
	}
	stop()

	// Second start: same token, read back from its file, not printed.
	info2, banner2, stop2 := startServer(t, dir)
	if info2.BoardToken != info.BoardToken {
		t.Errorf("second start BoardToken = %q, want the first one", info2.BoardToken)
	}
	if out := banner2.String(); strings.Contains(out, info.BoardToken) || !strings.Contains(out, "board token: in ") {
		t.Errorf("second start banner:\n%s", out)
	}
	stop2()

	// Third start without the file: the hash alone remains.
	if err := os.Remove(info.BoardTokenFile); err != nil {
		t.Fatal(err)
	}
	info3, banner3, _ := startServer(t, dir)
	if info3.BoardToken != "" || !strings.Contains(banner3.String(), "set at first start") {
		t.Errorf("third start: BoardToken %q, banner:\n%s", info3.BoardToken, banner3.String())
	}
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := runCLI(t, nil, "", "migrate", "--data-dir", dir)
	if r.code != 0 || !strings.Contains(r.stdout, "schema version ") {
		t.Fatalf("migrate: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	again := runCLI(t, map[string]string{EnvDataDir: dir}, "", "migrate")
	if again.stdout != r.stdout {
		t.Errorf("second migrate printed %q, want %q", again.stdout, r.stdout)
	}
}

// TestClientCommands drives the client commands against a real server
// started in-process.
func TestClientCommands(t *testing.T) {
	t.Parallel()
	info, _, _ := startServer(t, t.TempDir())
	board := map[string]string{EnvURL: info.URL, EnvToken: info.BoardToken}

	// mustJSON runs a command that must succeed and decodes its --json output.
	mustJSON := func(env map[string]string, out any, args ...string) {
		t.Helper()
		r := runCLI(t, env, "", append(args, "--json")...)
		if r.code != 0 {
			t.Fatalf("clasp %v: exit %d, stderr %q", args, r.code, r.stderr)
		}
		if err := json.Unmarshal([]byte(r.stdout), out); err != nil {
			t.Fatalf("clasp %v: output %q: %v", args, r.stdout, err)
		}
	}
	var co clasp.Company
	mustJSON(board, &co, "company", "create", "Acme", "--prefix", "ACME")
	var cos []clasp.Company
	mustJSON(board, &cos, "company", "list")
	if len(cos) != 1 || cos[0].ID != co.ID {
		t.Errorf("company list = %+v", cos)
	}
	var ag clasp.Agent
	mustJSON(board, &ag, "agent", "create", "Builder", "--company", co.ID, "--role", "engineer")
	var key clasp.APIKey
	mustJSON(board, &key, "agent", "key", "create", ag.ID)
	if !strings.HasPrefix(key.Token, "clasp_ak_") {
		t.Fatalf("key token = %q", key.Token)
	}
	var keys []clasp.APIKey
	mustJSON(board, &keys, "agent", "key", "list", ag.ID)
	if len(keys) != 1 || keys[0].Token != "" || keys[0].Prefix != key.Prefix {
		t.Errorf("key list = %+v", keys)
	}

	agentEnv := map[string]string{EnvURL: info.URL, EnvToken: key.Token}
	var me clasp.Agent
	mustJSON(agentEnv, &me, "agent", "me")
	if me.ID != ag.ID {
		t.Errorf("agent me = %s, want %s", me.ID, ag.ID)
	}
	var iss clasp.Issue
	mustJSON(agentEnv, &iss, "issue", "create", "Fix the login page", "--status", "todo", "--priority", "high")
	if iss.Identifier != "ACME-1" || iss.CompanyID != co.ID {
		t.Errorf("issue = %s in %s, want ACME-1 in %s", iss.Identifier, iss.CompanyID, co.ID)
	}
	var run clasp.Run
	mustJSON(agentEnv, &run, "run", "open")
	runEnv := map[string]string{EnvURL: info.URL, EnvToken: run.RunToken}
	var held clasp.Issue
	mustJSON(runEnv, &held, "issue", "checkout", "acme-1")
	if held.CheckoutRunID == nil || *held.CheckoutRunID != run.ID || held.CheckoutEpoch != 1 {
		t.Errorf("checkout: run %v epoch %d, want %s 1", held.CheckoutRunID, held.CheckoutEpoch, run.ID)
	}
	var inbox []clasp.InboxItem
	mustJSON(runEnv, &inbox, "agent", "inbox")
	if len(inbox) != 1 || inbox[0].Identifier != "ACME-1" {
		t.Errorf("inbox = %+v", inbox)
	}

	// The board force-releases; the run, still the assignee's, checks the
	// issue out again under a new epoch and finishes it.
	var fr clasp.Issue
	mustJSON(board, &fr, "issue", "force-release", "ACME-1", "--reason", "test")
	if fr.CheckoutRunID != nil {
		t.Errorf("force-release left checkoutRunId %v", *fr.CheckoutRunID)
	}
	mustJSON(runEnv, &held, "issue", "checkout", "ACME-1", "--expect", "todo,in_progress")
	if held.CheckoutEpoch != 2 {
		t.Errorf("checkout after force-release: epoch %d, want 2", held.CheckoutEpoch)
	}
	var done clasp.Issue
	mustJSON(runEnv, &done, "issue", "update", "ACME-1", "--status", "done", "--comment", "fixed")
	if done.Status != clasp.IssueDone || done.CheckoutRunID != nil {
		t.Errorf("update: status %s, lock %v", done.Status, done.CheckoutRunID)
	}
	var comments []clasp.Comment
	mustJSON(board, &comments, "issue", "comments", "ACME-1")
	if len(comments) != 1 || comments[0].Body != "fixed" {
		t.Errorf("comments = %+v", comments)
	}
	var finished clasp.Run
	mustJSON(runEnv, &finished, "run", "finish", run.ID)
	if finished.Status != clasp.RunSucceeded {
		t.Errorf("finish: %s", finished.Status)
	}
	if r := runCLI(t, agentEnv, "", "run", "heartbeat", run.ID, "--run", run.ID); r.code != ExitConflict {
		t.Errorf("heartbeat of a finished run: exit %d, want 3; stderr %q", r.code, r.stderr)
	}
	var acts []clasp.Activity
	mustJSON(board, &acts, "activity", "--issue", "ACME-1")
	seen := map[string]bool{}
	for _, a := range acts {
		seen[a.Action] = true
	}
	for _, want := range []string{clasp.ActionIssueCreated, clasp.ActionIssueCheckedOut, clasp.ActionIssueForceRelease} {
		if !seen[want] {
			t.Errorf("issue activity lacks %s: %v", want, seen)
		}
	}
	// clasp events replays the history with --after 0, one JSON row per line.
	ev := runCLI(t, board, "", "events", "--company", co.ID, "--after", "0", "--action", clasp.ActionIssueCheckedOut, "--count", "2", "--json")
	lines := strings.Split(strings.TrimSpace(ev.stdout), "\n")
	if ev.code != 0 || len(lines) != 2 {
		t.Fatalf("events: exit %d, %d lines, want 0 and 2; stdout %q stderr %q", ev.code, len(lines), ev.stdout, ev.stderr)
	}
	for i, line := range lines {
		var a clasp.Activity
		if err := json.Unmarshal([]byte(line), &a); err != nil || a.Action != clasp.ActionIssueCheckedOut || a.RunID == nil || *a.RunID != run.ID {
			t.Errorf("events line %d = %q (%v), want issue.checked_out of run %s", i, line, err, run.ID)
		}
	}
	var runs []clasp.Run
	mustJSON(board, &runs, "run", "list", "--company", co.ID, "--status", "succeeded")
	if len(runs) != 1 || runs[0].ID != run.ID {
		t.Errorf("run list = %+v", runs)
	}
	var paused clasp.Agent
	mustJSON(board, &paused, "agent", "pause", ag.ID)
	if paused.Status != clasp.AgentPaused {
		t.Errorf("pause: status %s", paused.Status)
	}

	// People get tables.
	r := runCLI(t, board, "", "issue", "list", "--company", co.ID)
	if r.code != 0 || !strings.Contains(r.stdout, "ACME-1") || !strings.Contains(r.stdout, "done") {
		t.Errorf("issue list table: exit %d\n%s", r.code, r.stdout)
	}
}

// TestServeRefusesSecondServerOnDataDir: a second serve on a data directory
// whose SQLite database another serve is serving is refused with an error
// naming the holder's pid and --data-dir; once the first has stopped, a
// serve on the directory starts again.
func TestServeRefusesSecondServerOnDataDir(t *testing.T) {
	dir := t.TempDir()
	_, _, stop := startServer(t, dir)
	r := runCLI(t, nil, "", "serve", "--listen", "127.0.0.1:0", "--data-dir", dir)
	if r.code != ExitError || !strings.Contains(r.stderr, "another clasp serve (pid ") || !strings.Contains(r.stderr, "--data-dir") ||
		!strings.Contains(r.stderr, ServeLockFileName) {
		t.Fatalf("second serve: exit %d, stderr %q; want exit 1 naming the first serve's pid, %s and --data-dir", r.code, r.stderr, ServeLockFileName)
	}
	stop()
	startServer(t, dir) // the lock went with the first server
}

// TestServeDataDirAcrossStores: PostgreSQL replicas may share a data
// directory, but a SQLite serve and a PostgreSQL serve may not (the second
// would overwrite the first's board token file); each refusal names the
// holder and --data-dir.
func TestServeDataDirAcrossStores(t *testing.T) {
	u := testDatabase(t)
	pgServe := func(dir string) (stop func(), err error) {
		ctx, cancel := context.WithCancel(context.Background())
		ready := make(chan ServeInfo, 1)
		done := make(chan error, 1)
		go func() {
			done <- Serve(ctx, ServeConfig{DataDir: dir, DatabaseURL: u.String(), Listen: "127.0.0.1:0"}, ready)
		}()
		select {
		case <-ready:
			return func() { cancel(); <-done }, nil
		case err := <-done:
			cancel()
			return nil, err
		}
	}
	// Two PostgreSQL replicas on one directory, then a SQLite serve on it.
	pgDir := t.TempDir()
	stop1, err := pgServe(pgDir)
	if err != nil {
		t.Fatalf("first PostgreSQL serve: %v", err)
	}
	defer stop1()
	stop2, err := pgServe(pgDir)
	if err != nil {
		t.Fatalf("a second PostgreSQL replica on the same directory: %v", err)
	}
	defer stop2()
	r := runCLI(t, nil, "", "serve", "--listen", "127.0.0.1:0", "--data-dir", pgDir)
	if r.code != ExitError || !strings.Contains(r.stderr, "PostgreSQL") || !strings.Contains(r.stderr, "--data-dir") {
		t.Errorf("SQLite serve on the replicas' directory: exit %d, stderr %q; want a refusal naming the PostgreSQL holder and --data-dir", r.code, r.stderr)
	}
	// A PostgreSQL serve on a SQLite server's directory.
	sqDir := t.TempDir()
	startServer(t, sqDir)
	if stop, err := pgServe(sqDir); err == nil {
		stop()
		t.Errorf("PostgreSQL serve on a SQLite server's directory started")
	} else if !strings.Contains(err.Error(), "SQLite") || !strings.Contains(err.Error(), "--data-dir") {
		t.Errorf("PostgreSQL serve on a SQLite server's directory: %v; want the refusal naming the SQLite holder and --data-dir", err)
	}
}
