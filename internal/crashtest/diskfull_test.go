package crashtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// smallFilesystem mounts a tmpfs of the given size ("16m") on a fresh
// directory for the test and unmounts it at cleanup (after the servers the
// test starts later are killed: cleanups run last first). It needs Linux
// and root; elsewhere the test is skipped with the reason, except under CI,
// where it fails: .ci/run runs as root, so the disk-full tests must run.
func smallFilesystem(t *testing.T, size string) string {
	t.Helper()
	cannot := func(why string) {
		t.Helper()
		if os.Getenv("CI") != "" {
			t.Fatalf("cannot make a small filesystem for the disk-full test: %s (CI must run it: run .ci/run as root on Linux)", why)
		}
		t.Skipf("cannot make a small filesystem for the disk-full test: %s (it needs Linux and root to mount a tmpfs)", why)
	}
	if runtime.GOOS != "linux" {
		cannot("not Linux")
	}
	if os.Geteuid() != 0 {
		cannot("not running as root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0755", "clasp-diskfull", dir).CombinedOutput(); err != nil {
		cannot(fmt.Sprintf("mount -t tmpfs: %v: %s", err, strings.TrimSpace(string(out))))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			// Still busy (a child outlived its kill): detach it, so the
			// directory can go; the memory is freed when the last user ends.
			if out2, err2 := exec.Command("umount", "-l", dir).CombinedOutput(); err2 != nil {
				t.Errorf("umount %s: %v: %s; umount -l: %v: %s", dir, err, out, err2, out2)
			}
		}
	})
	return dir
}

// fillDisk writes zeros to a file in dir until the filesystem refuses
// (ENOSPC) and returns the file's path; removing it frees the space.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path) // #nosec G304 -- a file in the test's own filesystem
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill the disk: %v", err)
			}
			return path
		}
	}
}

// checkLocks reads every issue of a company and its activity through the
// API and checks L7 on each: a checkout lock implies status in_progress and
// an execution lock naming the same run, and checkoutEpoch equals the
// number of issue.checked_out rows, the last of which names the holder.
// It returns the issues by id.
func checkLocks(t *testing.T, ctx context.Context, board *client.Client, companyID, when string) map[string]*clasp.Issue {
	t.Helper()
	issues, err := allIssues(ctx, board, companyID)
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	acts, err := allActivity(ctx, board, companyID, clasp.ActionIssueCheckedOut)
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	outs := map[string][]*clasp.Activity{}
	for _, a := range acts {
		outs[a.EntityID] = append(outs[a.EntityID], a)
	}
	for id, iss := range issues {
		if iss.CheckoutRunID != nil && (iss.Status != clasp.IssueInProgress || iss.ExecutionRunID == nil || *iss.ExecutionRunID != *iss.CheckoutRunID) {
			t.Errorf("%s: %s breaks L7: checkoutRunId %s, status %s, executionRunId %s", when, iss.Identifier, str(iss.CheckoutRunID), iss.Status, str(iss.ExecutionRunID))
		}
		o := outs[id]
		if int64(len(o)) != iss.CheckoutEpoch {
			t.Errorf("%s: %s: checkoutEpoch %d, but %d issue.checked_out rows", when, iss.Identifier, iss.CheckoutEpoch, len(o))
		}
		if iss.CheckoutRunID != nil && len(o) > 0 && runOf(o[len(o)-1]) != *iss.CheckoutRunID {
			t.Errorf("%s: %s: held by run %s, but its last issue.checked_out row names run %s", when, iss.Identifier, *iss.CheckoutRunID, runOf(o[len(o)-1]))
		}
	}
	return issues
}

// unlimitedArgs turn off serve's rate limits: the disk-full and backup
// tests send writes as fast as the server answers them.
var unlimitedArgs = []string{"--rate-address", "-1", "--rate-credential", "-1", "--rate-comments-per-run", "-1"}

// TestDiskFull_SQLite runs a real `clasp serve` whose data directory is on
// a 16 MiB tmpfs, fills the filesystem, and checks: writes are answered
// 200 until the database cannot grow, then 503 unavailable with
// details.reason disk_full and a message saying what happened and what to
// do; every lock write in that state is either refused whole or made
// whole (L7 and the epochs hold); reads keep working; once the filler file
// is removed the very next write succeeds on the same server process (the
// writer connection recovers by itself); and after a SIGKILL and a
// restart every acknowledged write is there.
func TestDiskFull_SQLite(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts a filesystem and runs a real server; skipped with -short")
	}
	ctx := t.Context()
	fs := smallFilesystem(t, "16m")
	log := &syncBuffer{}
	args := append([]string{"--data-dir", filepath.Join(fs, "data"), "--lease-ttl", "5m"}, unlimitedArgs...)
	srv := startServer(t, args, log)
	hc := newHTTPClient()
	board := client.New(srv.URL(), client.WithToken(srv.BoardToken()), client.WithHTTPClient(hc))
	f := setUp(t, ctx, board, srv.URL(), hc, 2, 3)
	agent := func(i int) *client.Client {
		return client.New(srv.URL(), client.WithToken(f.runs[i].RunToken), client.WithHTTPClient(hc))
	}
	todo := []clasp.IssueStatus{clasp.IssueTodo}
	if _, err := agent(0).IssueCheckout(ctx, f.issues[0].ID, client.CheckoutRequest{AgentID: f.agents[0].ID, ExpectedStatuses: todo}); err != nil {
		t.Fatalf("checkout before the disk fills: %v", err)
	}

	pad := strings.Repeat("x", 4096)
	var acked []string
	for i := range 20 {
		c, err := board.CommentCreate(ctx, f.issues[0].ID, client.CommentCreateRequest{Body: fmt.Sprintf("before %d %s", i, pad)})
		if err != nil {
			t.Fatalf("comment before the disk fills: %v", err)
		}
		acked = append(acked, c.ID)
	}

	filler := fillDisk(t, fs)
	// Comments of 4 KiB by the board until the database cannot grow.
	var refused *clasp.Error
	for i := 0; i < 4000 && refused == nil; i++ {
		c, err := board.CommentCreate(ctx, f.issues[0].ID, client.CommentCreateRequest{Body: fmt.Sprintf("comment %d %s", i, pad)})
		switch e := clasp.AsError(err); {
		case err == nil:
			acked = append(acked, c.ID)
		case e != nil && e.Code == clasp.CodeUnavailable:
			refused = e
		default:
			t.Fatalf("comment %d on a full disk: %v; want 200, or 503 unavailable", i, err)
		}
	}
	if refused == nil {
		t.Fatalf("4000 comments of 4 KiB were all stored on a full 16 MiB filesystem: the disk never refused a write")
	}
	t.Logf("disk full after %d acknowledged comments: %v", len(acked), refused)
	if refused.Status != 503 || refused.Details["reason"] != "disk_full" || !strings.Contains(refused.Message, "disk") || !strings.Contains(refused.Message, "Free space") {
		t.Errorf("refused write: status %d, details %v, message %q; want 503 with reason disk_full and a message naming the full disk and what to do", refused.Status, refused.Details, refused.Message)
	}

	// In that state a checkout and a release are made whole or refused
	// whole; nothing else is an acceptable answer.
	lockWrite := func(what string, call func() (*clasp.Issue, error)) {
		t.Helper()
		_, err := call()
		if e := clasp.AsError(err); err != nil && (e == nil || e.Code != clasp.CodeUnavailable || e.Details["reason"] != "disk_full") {
			t.Errorf("%s on a full disk: %v; want 200 or 503 disk_full", what, err)
		}
		t.Logf("%s on a full disk: %v", what, err)
	}
	lockWrite("checkout", func() (*clasp.Issue, error) {
		return agent(1).IssueCheckout(ctx, f.issues[1].ID, client.CheckoutRequest{AgentID: f.agents[1].ID, ExpectedStatuses: todo})
	})
	lockWrite("release", func() (*clasp.Issue, error) {
		return agent(0).IssueRelease(ctx, f.issues[0].ID, client.ReleaseRequest{})
	})

	// Reads keep working.
	if err := board.Readyz(ctx); err != nil {
		t.Errorf("/readyz on a full disk: %v", err)
	}
	cs, err := board.CommentList(ctx, f.issues[0].ID, client.CommentListParams{Limit: 1000})
	if err != nil {
		t.Fatalf("list comments on a full disk: %v", err)
	}
	if len(cs) != len(acked) {
		t.Errorf("on a full disk: %d comments listed, %d acknowledged", len(cs), len(acked))
	}
	checkLocks(t, ctx, board, f.company.ID, "on a full disk")

	// Space freed: the next write succeeds on the same process.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	c, err := board.CommentCreate(ctx, f.issues[0].ID, client.CommentCreateRequest{Body: "after the disk was freed"})
	if err != nil {
		t.Fatalf("first write after freeing the disk: %v; want it to succeed without a restart", err)
	}
	acked = append(acked, c.ID)
	if _, err := agent(1).IssueCheckout(ctx, f.issues[2].ID, client.CheckoutRequest{AgentID: f.agents[1].ID, ExpectedStatuses: todo}); err != nil {
		t.Errorf("checkout after freeing the disk: %v", err)
	}

	// Nothing acknowledged was lost: kill, restart, read back.
	srv.Kill()
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := srv.Restart(rctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	hc.CloseIdleConnections()
	cs, err = board.CommentList(ctx, f.issues[0].ID, client.CommentListParams{Limit: 1000})
	if err != nil {
		t.Fatalf("list comments after the restart: %v", err)
	}
	ids := make([]string, 0, len(cs))
	for _, c := range cs {
		ids = append(ids, c.ID)
	}
	for _, id := range acked {
		if !slices.Contains(ids, id) {
			t.Errorf("acknowledged comment %s is missing after the restart", id)
		}
	}
	issues := checkLocks(t, ctx, board, f.company.ID, "after the restart")
	if iss := issues[f.issues[2].ID]; iss == nil || iss.CheckoutRunID == nil || *iss.CheckoutRunID != f.runs[1].ID {
		t.Errorf("the checkout acknowledged after the disk was freed is not held after the restart: %+v", iss)
	}
}
