package crashtest

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// backupWrite is one write a backup-test writer made, with when it was
// sent and when its 200 came back.
type backupWrite struct {
	kind       string // "comment" or "checkout"
	issueID    string
	id         string // comment id
	runID      string // checkout: the run that took the lock
	epoch      int64  // checkout: the epoch it was granted
	sent, done time.Time
}

// TestBackupRestore_SQLite is the backup round trip with the real binary:
// `clasp serve` takes comments, checkouts and releases from 4 writers;
// `clasp backup` runs while they go on; `clasp restore` is refused while
// the server runs; the server is stopped, the backup restored and the
// server started again. Then every write acknowledged before the backup
// began is there, no write sent after the backup ended is, every issue
// satisfies L7 (and its epoch counts its checkouts), and the restored
// server serves a checkout.
func TestBackupRestore_SQLite(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real server; skipped with -short")
	}
	ctx := t.Context()
	dataDir := filepath.Join(t.TempDir(), "data")
	backupFile := filepath.Join(t.TempDir(), "clasp-backup.db")
	log := &syncBuffer{}
	srv := startServer(t, append([]string{"--data-dir", dataDir, "--lease-ttl", "5m"}, unlimitedArgs...), log)
	hc := newHTTPClient()
	board := client.New(srv.URL(), client.WithToken(srv.BoardToken()), client.WithHTTPClient(hc))
	const writers = 4
	f := setUp(t, ctx, board, srv.URL(), hc, writers, 12)

	var mu sync.Mutex
	var writes []backupWrite
	record := func(w backupWrite) {
		mu.Lock()
		defer mu.Unlock()
		writes = append(writes, w)
	}
	lctx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range writers {
		agent := client.New(srv.URL(), client.WithToken(f.runs[i].RunToken), client.WithHTTPClient(hc))
		wg.Go(func() {
			for n := 0; lctx.Err() == nil; n++ {
				iss := f.issues[rand.IntN(len(f.issues))]
				sent := time.Now()
				c, err := agent.CommentCreate(lctx, iss.ID, client.CommentCreateRequest{Body: fmt.Sprintf("writer %d comment %d", i, n)})
				if err == nil {
					record(backupWrite{kind: "comment", issueID: iss.ID, id: c.ID, sent: sent, done: time.Now()})
				}
				sent = time.Now()
				got, err := agent.IssueCheckout(lctx, iss.ID, client.CheckoutRequest{AgentID: f.agents[i].ID,
					ExpectedStatuses: []clasp.IssueStatus{clasp.IssueTodo, clasp.IssueInProgress}})
				if err != nil {
					continue // held by another writer, or the load ended
				}
				record(backupWrite{kind: "checkout", issueID: iss.ID, runID: f.runs[i].ID, epoch: got.CheckoutEpoch, sent: sent, done: time.Now()})
				_, _ = agent.IssueRelease(lctx, iss.ID, client.ReleaseRequest{})
			}
		})
	}
	defer func() { stopLoad(); wg.Wait() }()

	// waitWrites waits until n acknowledged writes satisfy ok, or the load
	// ends (the test's context).
	waitWrites := func(n int, ok func(backupWrite) bool) {
		for lctx.Err() == nil {
			mu.Lock()
			c := 0
			for _, w := range writes {
				if ok(w) {
					c++
				}
			}
			mu.Unlock()
			if c >= n {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitWrites(50, func(backupWrite) bool { return true }) // writes before the backup
	began := time.Now()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, claspBin, "backup", "--data-dir", dataDir, "--to", backupFile) // #nosec G204 -- the binary under test
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("clasp backup while writes go on: %v\n%s", err, stderr.String())
	}
	ended := time.Now()
	t.Logf("clasp backup (%s):\n%s", ended.Sub(began).Round(time.Millisecond), stderr.String())
	if !strings.Contains(stderr.String(), "integrity ok") {
		t.Errorf("clasp backup's report does not say the copy was checked:\n%s", stderr.String())
	}
	// Writes after the backup: the restore must undo them.
	waitWrites(20, func(w backupWrite) bool { return w.sent.After(ended) })
	stopLoad()
	wg.Wait()

	// A restore while the server runs is refused, and changes nothing.
	out, err := exec.CommandContext(ctx, claspBin, "restore", "--data-dir", dataDir, "--from", backupFile).CombinedOutput() // #nosec G204 -- the binary under test
	if err == nil || !strings.Contains(string(out), "stop the server first") {
		t.Errorf("clasp restore while the server runs: %v\n%s\nwant a refusal saying to stop the server", err, out)
	}
	if _, err := board.CommentCreate(ctx, f.issues[0].ID, client.CommentCreateRequest{Body: "after the refused restore"}); err != nil {
		t.Errorf("write after the refused restore: %v", err)
	}

	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := srv.Stop(sctx); err != nil {
		t.Fatalf("stop the server: %v", err)
	}
	out, err = exec.CommandContext(ctx, claspBin, "restore", "--data-dir", dataDir, "--from", backupFile).CombinedOutput() // #nosec G204 -- the binary under test
	if err != nil {
		t.Fatalf("clasp restore: %v\n%s", err, out)
	}
	t.Logf("clasp restore:\n%s", out)
	if err := srv.Restart(sctx); err != nil {
		t.Fatalf("start the restored server: %v", err)
	}
	hc.CloseIdleConnections()

	comments := map[string]bool{}
	for _, iss := range f.issues {
		cs, err := board.CommentList(ctx, iss.ID, client.CommentListParams{Limit: 1000})
		if err != nil {
			t.Fatalf("list comments of the restored server: %v", err)
		}
		for _, c := range cs {
			comments[c.ID] = true
		}
	}
	acts, err := allActivity(ctx, board, f.company.ID, clasp.ActionIssueCheckedOut)
	if err != nil {
		t.Fatal(err)
	}
	type grant struct {
		issue, run string
		epoch      int64
	}
	grants := map[grant]bool{}
	for _, a := range acts {
		if e := detailsOf(a).CheckoutEpoch; e != nil {
			grants[grant{a.EntityID, runOf(a), *e}] = true
		}
	}
	before, after := 0, 0
	for _, w := range writes {
		var present bool
		if w.kind == "comment" {
			present = comments[w.id]
		} else {
			present = grants[grant{w.issueID, w.runID, w.epoch}]
		}
		switch {
		case w.done.Before(began):
			before++
			if !present {
				t.Errorf("%s acknowledged before the backup began (%s) is missing after the restore: %+v", w.kind, began.Sub(w.done), w)
			}
		case w.sent.After(ended):
			after++
			if present {
				t.Errorf("%s sent after the backup ended is in the restored database: %+v", w.kind, w)
			}
		}
	}
	if before == 0 || after == 0 {
		t.Fatalf("%d writes acknowledged before the backup, %d sent after it: the test needs both", before, after)
	}
	t.Logf("%d writes in all: %d acknowledged before the backup began (all restored), %d sent after it ended (none restored)", len(writes), before, after)

	issues := checkLocks(t, ctx, board, f.company.ID, "after the restore")
	// The restored server serves: a checkout and a release of a free issue.
	for _, iss := range f.issues {
		if got := issues[iss.ID]; got != nil && got.CheckoutRunID == nil {
			i := 0 // the agent it is assigned to, if any (rule L1 refuses the others)
			for j, a := range f.agents {
				if got.AssigneeAgentID != nil && *got.AssigneeAgentID == a.ID {
					i = j
				}
			}
			agent := client.New(srv.URL(), client.WithToken(f.runs[i].RunToken), client.WithHTTPClient(hc))
			if _, err := agent.IssueCheckout(ctx, iss.ID, client.CheckoutRequest{AgentID: f.agents[i].ID,
				ExpectedStatuses: []clasp.IssueStatus{got.Status}}); err != nil {
				t.Errorf("checkout on the restored server: %v", err)
			} else if _, err := agent.IssueRelease(ctx, iss.ID, client.ReleaseRequest{}); err != nil {
				t.Errorf("release on the restored server: %v", err)
			}
			break
		}
	}
	checkLocks(t, ctx, board, f.company.ID, "after a checkout on the restored server")
}
