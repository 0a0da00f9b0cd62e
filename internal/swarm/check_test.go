package swarm_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
	"github.com/clasp-dev/clasp/internal/cli"
	"github.com/clasp-dev/clasp/internal/swarm"
)

// startServer runs the server of `clasp serve` in-process on a free port
// with a fresh database, lease TTL ttl and sweep interval sweep, and
// returns a board client.
func startServer(t *testing.T, ttl, sweep time.Duration) *client.Client {
	t.Helper()
	return startServerWith(t, cli.ServeConfig{LeaseTTL: ttl, SweepInterval: sweep})
}

// startServerWith is startServer with cfg (its DataDir and Listen are set
// here).
func startServerWith(t *testing.T, cfg cli.ServeConfig) *client.Client {
	t.Helper()
	cfg.DataDir, cfg.Listen = t.TempDir(), "127.0.0.1:0"
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan cli.ServeInfo, 1)
	served := make(chan error, 1)
	go func() {
		served <- cli.Serve(ctx, cfg, ready)
	}()
	var info cli.ServeInfo
	select {
	case info = <-ready:
	case err := <-served:
		cancel()
		t.Fatalf("serve: %v", err)
	}
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(func() {
		hc.CloseIdleConnections()
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return client.New(info.URL, client.WithToken(info.BoardToken), client.WithHTTPClient(hc))
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func ptr[T any](v T) *T { return &v }

// TestCheckFindsBrokenState builds, through the API, a company where one
// issue is worked correctly and every other issue breaks one guarantee, and
// checks that Check names exactly those (and that a file changed on disk
// after hashing is accepted when the result matches its new content, or
// one removed when the result says it could not be read).
func TestCheckFindsBrokenState(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	// The sweeper is held off, so that the broken states stay broken.
	board := startServer(t, time.Minute, time.Hour)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	co, err := board.CompanyCreate(ctx, client.CompanyCreateRequest{Name: "check", IssuePrefix: "CHK"})
	must(err)
	ag, err := board.AgentCreate(ctx, co.ID, client.AgentCreateRequest{Name: "a"})
	must(err)
	key, err := board.AgentKeyCreate(ctx, ag.ID)
	must(err)
	agent := board.WithToken(key.Token)

	dir := t.TempDir()
	expected := map[string]string{}
	file := func(name, content string) (abs, hash string) {
		abs = filepath.Join(dir, name)
		must(os.WriteFile(abs, []byte(content), 0o644))
		return abs, sum([]byte(content))
	}
	issue := func(name, content string) *clasp.Issue {
		abs, hash := file(name, content)
		iss, err := board.IssueCreate(ctx, co.ID, client.IssueCreateRequest{Title: name, Description: abs, Status: clasp.IssueTodo})
		must(err)
		expected[iss.ID] = hash
		return iss
	}
	done := clasp.IssueDone
	work := func(iss *clasp.Issue, result string, finish bool) {
		run, err := agent.RunOpen(ctx, client.RunOpenRequest{})
		must(err)
		rc := agent.WithRun(run.ID)
		_, err = rc.IssueCheckout(ctx, iss.ID, client.CheckoutRequest{AgentID: ag.ID, ExpectedStatuses: []clasp.IssueStatus{clasp.IssueTodo}})
		must(err)
		if !finish {
			return // left running, holding the lock
		}
		_, err = rc.IssueUpdate(ctx, iss.ID, client.IssueUpdateRequest{Status: &done, Comment: ptr(result)})
		must(err)
		_, err = rc.RunFinish(ctx, run.ID, client.RunFinishRequest{Status: clasp.RunSucceeded})
		must(err)
	}
	boardDone := func(iss *clasp.Issue, result string) {
		_, err := board.IssueUpdate(ctx, iss.ID, client.IssueUpdateRequest{Status: &done, Comment: ptr(result)})
		must(err)
	}

	good := issue("good", "good content")
	work(good, "sha256 "+expected[good.ID], true)

	locked := issue("locked", "locked content")
	work(locked, "", false)

	dup := issue("dup", "dup content")
	boardDone(dup, "sha256 "+expected[dup.ID])
	_, err = board.CommentCreate(ctx, dup.ID, client.CommentCreateRequest{Body: "sha256 " + expected[dup.ID]})
	must(err)

	wrong := issue("wrong", "wrong content")
	boardDone(wrong, "sha256 "+sum([]byte("something else")))

	todo := issue("todo", "todo content")

	changed := issue("changed", "old content")
	_, newHash := file("changed", "new content") // rewritten after the swarm hashed it
	work(changed, "sha256 "+newHash, true)

	gone := issue("gone", "gone content")
	must(os.Remove(gone.Description)) // vanished after the swarm hashed it
	boardDone(gone, "sha256 error: open "+gone.Description+": no such file or directory")

	extra, err := board.IssueCreate(ctx, co.ID, client.IssueCreateRequest{Title: "extra", Status: clasp.IssueTodo})
	must(err)
	boardDone(extra, "sha256 whatever")

	ghost := "00000000-0000-4000-8000-000000000000"
	expected[ghost] = sum(nil)

	tally, vs := swarm.Check(ctx, board, co.ID, expected)
	var got []string
	for _, v := range vs {
		got = append(got, v.Issue+" "+v.Check)
		t.Logf("violation: %s", v)
	}
	sort.Strings(got)
	want := []string{
		" " + swarm.CheckMissing,
		" " + swarm.CheckRunLive,
		dup.Identifier + " " + swarm.CheckResultCount,
		extra.Identifier + " " + swarm.CheckUnexpected,
		locked.Identifier + " " + swarm.CheckDoneCount,
		locked.Identifier + " " + swarm.CheckLockActivity,
		locked.Identifier + " " + swarm.CheckLockLeft,
		locked.Identifier + " " + swarm.CheckNotDone,
		locked.Identifier + " " + swarm.CheckResultCount,
		todo.Identifier + " " + swarm.CheckDoneCount,
		todo.Identifier + " " + swarm.CheckNotDone,
		todo.Identifier + " " + swarm.CheckResultCount,
		wrong.Identifier + " " + swarm.CheckWrongHash,
	}
	sort.Strings(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("violations (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"changed", "gone"}, tally.FilesChanged); diff != "" {
		t.Errorf("files changed (-want +got):\n%s", diff)
	}
	if tally.CheckedOut != 3 || tally.Done != 6 {
		t.Errorf("tally checkedOut %d, done %d; want 3, 6", tally.CheckedOut, tally.Done)
	}

	// The good issue alone passes every check.
	_, vs = swarm.Check(ctx, board, co.ID, map[string]string{good.ID: expected[good.ID]})
	for _, v := range vs {
		if v.Issue == good.Identifier {
			t.Errorf("good issue: %s", v)
		}
	}
}
