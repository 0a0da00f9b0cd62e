package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// gate holds the writer: blockWriter starts a write whose function waits
// for open, so that the writes started next queue up behind it and are
// committed together, as one batch, once the gate opens.
type gate struct {
	open chan struct{}
	done chan error
}

func blockWriter(t *testing.T, s *Driver) *gate {
	t.Helper()
	g := &gate{open: make(chan struct{}), done: make(chan error, 1)}
	started := make(chan struct{})
	go func() {
		g.done <- s.write(context.Background(), func(tx *wtx) error {
			close(started)
			<-g.open
			return nil
		})
	}()
	<-started
	return g
}

// release opens the gate and waits for the blocking write to commit.
func (g *gate) release(t *testing.T) {
	t.Helper()
	close(g.open)
	if err := <-g.done; err != nil {
		t.Fatalf("blocking write: %v", err)
	}
}

// queued returns how many writes wait for the writer.
func (s *Driver) queued() int {
	s.gc.mu.Lock()
	defer s.gc.mu.Unlock()
	return len(s.gc.queue)
}

// waitQueued waits until n writes wait for the writer (no deadline: a
// write that never queues fails the test by the test timeout).
func waitQueued(s *Driver, n int) {
	for s.queued() != n {
		runtime.Gosched()
		time.Sleep(100 * time.Microsecond)
	}
}

// async runs f on a goroutine; the returned channel receives its error.
func async(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

func putSetting(s *testStore, ctx context.Context, key string) func() error {
	return func() error {
		_, err := s.SettingPutIfAbsent(ctx, key, "v")
		return err
	}
}

// settingsSet reports which of keys are set.
func settingsSet(t *testing.T, s *testStore, keys ...string) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	for _, k := range keys {
		_, err := s.SettingGet(context.Background(), k)
		switch clasp.ErrorCode(err) {
		case "":
			got[k] = true
		case clasp.CodeNotFound:
			got[k] = false
		default:
			t.Fatalf("get setting %s: %v", k, err)
		}
	}
	return got
}

func TestGroupCommitBatchesQueuedWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, Options{Synchronous: "FULL"})
	co, err := s.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "Acme", IssuePrefix: "ACME", Actor: board})
	if err != nil {
		t.Fatalf("setup: company: %v", err)
	}
	wake := s.WatchActivity(t.Context())
	before := s.d.WriteStats()

	g := blockWriter(t, s.d)
	const n = 31
	results := make([]<-chan error, n)
	idents := make([]string, n)
	for i := range n {
		results[i] = async(func() error {
			iss, err := s.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: co.ID, Title: "t" + strconv.Itoa(i), Actor: board})
			if err == nil {
				idents[i] = iss.Identifier
			}
			return err
		})
	}
	waitQueued(s.d, n)
	g.release(t)
	for i, ch := range results {
		if err := <-ch; err != nil {
			t.Errorf("issue %d: %v", i, err)
		}
	}

	got := s.d.WriteStats()
	if d := (WriteStats{Writes: got.Writes - before.Writes, Commits: got.Commits - before.Commits}); d != (WriteStats{Writes: n + 1, Commits: 2}) {
		t.Errorf("writes and commits of the blocking write plus %d queued creates: got %+v, want {Writes:%d Commits:2}", n, d, n+1)
	}
	// Gapless identifiers: each write saw the ones batched ahead of it.
	seen := map[string]bool{}
	for _, id := range idents {
		seen[id] = true
	}
	for i := 1; i <= n; i++ {
		if id := fmt.Sprintf("ACME-%d", i); !seen[id] {
			t.Errorf("identifier %s: missing from %v", id, idents)
		}
	}
	// The post-commit hook ran for the batch (it wrote activity). The
	// watcher's channel is fed by a goroutine of its own, which may not
	// have run yet when the writes return: wait for it, within a bound
	// that only a watcher never woken reaches.
	select {
	case <-wake:
	case <-time.After(30 * time.Second):
		t.Errorf("activity watcher: not woken after the batch committed")
	}
}

func TestGroupCommitConcurrentWritersShareCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, Options{Synchronous: "FULL"})
	co, err := s.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "Acme", IssuePrefix: "ACME", Actor: board})
	if err != nil {
		t.Fatalf("setup: company: %v", err)
	}
	const writers, cycles = 32, 8
	type client struct {
		actor store.Actor
		issue string
	}
	clients := make([]client, writers)
	for i := range clients {
		a, err := s.AgentCreate(ctx, &store.AgentCreateParams{CompanyID: co.ID, Name: "a" + strconv.Itoa(i), Actor: board})
		if err != nil {
			t.Fatalf("setup: agent: %v", err)
		}
		r, err := s.RunOpen(ctx, &store.RunOpenParams{AgentID: a.ID, LeaseTTL: time.Hour, Actor: agentOf(a, "")})
		if err != nil {
			t.Fatalf("setup: run: %v", err)
		}
		iss, err := s.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: co.ID, Title: "w", Status: clasp.IssueTodo, Actor: board})
		if err != nil {
			t.Fatalf("setup: issue: %v", err)
		}
		clients[i] = client{agentOf(a, r.ID), iss.ID}
	}
	before := s.d.WriteStats()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for _, c := range clients {
		wg.Go(func() {
			for range cycles {
				iss, err := s.IssueCheckout(ctx, &store.IssueCheckoutParams{Ref: c.issue, AgentID: c.actor.AgentID,
					ExpectedStatuses: []clasp.IssueStatus{clasp.IssueTodo}, Actor: c.actor})
				if err != nil {
					errs <- fmt.Errorf("checkout: %w", err)
					return
				}
				if *iss.CheckoutRunID != c.actor.RunID {
					errs <- fmt.Errorf("checkout: held by %v, want %s", *iss.CheckoutRunID, c.actor.RunID)
					return
				}
				if _, err := s.IssueRelease(ctx, &store.IssueReleaseParams{Ref: c.issue, Actor: c.actor}); err != nil {
					errs <- fmt.Errorf("release: %w", err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got := s.d.WriteStats()
	writes, commits := got.Writes-before.Writes, got.Commits-before.Commits
	if writes != writers*cycles*2 || commits >= writes {
		t.Errorf("%d writers: got %d writes in %d commits, want %d writes in fewer commits", writers, writes, commits, writers*cycles*2)
	}
	for _, c := range clients {
		acts, _, err := s.ActivityList(ctx, &store.ActivityListParams{EntityID: c.issue, Action: clasp.ActionIssueCheckedOut})
		if err != nil || len(acts) != cycles {
			t.Errorf("issue.checked_out rows of %s: got %d, %v, want %d", c.issue, len(acts), err, cycles)
		}
	}
}

func TestGroupCommitFailingRequestRollsBackAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, Options{Synchronous: "NORMAL"})
	if _, err := s.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "Acme", IssuePrefix: "ACME", Actor: board}); err != nil {
		t.Fatalf("setup: company: %v", err)
	}
	before := s.d.WriteStats()
	boom := errors.New("boom")

	g := blockWriter(t, s.d)
	r1 := async(putSetting(s, ctx, "one"))
	waitQueued(s.d, 1)
	r2 := async(func() error { // writes, then fails: its write must vanish
		return s.d.write(ctx, func(tx *wtx) error {
			if _, err := tx.exec(ctx, "SettingInsert", sql.Named("key", "two"), sql.Named("value", "v")); err != nil {
				return err
			}
			return boom
		})
	})
	waitQueued(s.d, 2)
	r3 := async(func() error { // a statement fails (UNIQUE): the request fails, the transaction goes on
		_, err := s.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "Again", IssuePrefix: "ACME", Actor: board})
		return err
	})
	waitQueued(s.d, 3)
	r4 := async(putSetting(s, ctx, "four"))
	waitQueued(s.d, 4)
	g.release(t)

	if err := <-r1; err != nil {
		t.Errorf("request 1: %v", err)
	}
	if err := <-r2; !errors.Is(err, boom) {
		t.Errorf("request 2: got %v, want %v", err, boom)
	}
	if err := <-r3; clasp.ErrorCode(err) != clasp.CodeAlreadyExists {
		t.Errorf("request 3: got %v, want %s", err, clasp.CodeAlreadyExists)
	}
	if err := <-r4; err != nil {
		t.Errorf("request 4: %v", err)
	}
	want := map[string]bool{"one": true, "two": false, "four": true}
	if diff := cmp.Diff(want, settingsSet(t, s, "one", "two", "four")); diff != "" {
		t.Errorf("settings after the batch (-want +got):\n%s", diff)
	}
	cos, _, err := s.CompanyList(ctx, store.Page{}, false)
	if err != nil || len(cos) != 1 {
		t.Errorf("companies: got %d, %v, want 1", len(cos), err)
	}
	got := s.d.WriteStats()
	if d := (WriteStats{Writes: got.Writes - before.Writes, Commits: got.Commits - before.Commits}); d != (WriteStats{Writes: 3, Commits: 2}) {
		t.Errorf("writes and commits: got %+v, want {Writes:3 Commits:2} (the blocking write, then requests 1 and 4 together)", d)
	}
}

func TestGroupCommitCanceledRequestsDoNotPoisonTheBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, Options{Synchronous: "NORMAL"})
	before := s.d.WriteStats()

	g := blockWriter(t, s.d)
	// Request 1 leads the next batch; its function cancels request 5,
	// which is then in the batch already.
	ctx5, cancel5 := context.WithCancel(ctx)
	defer cancel5()
	r1 := async(func() error {
		return s.d.write(ctx, func(tx *wtx) error {
			cancel5()
			_, err := tx.exec(ctx, "SettingInsert", sql.Named("key", "one"), sql.Named("value", "v"))
			return err
		})
	})
	waitQueued(s.d, 1)
	// Request 2 is canceled while it waits: it leaves the queue at once.
	ctx2, cancel2 := context.WithCancel(ctx)
	r2 := async(putSetting(s, ctx2, "two"))
	waitQueued(s.d, 2)
	// Request 3 cancels its own context half-way: its next statement fails
	// and its first one is rolled back with it.
	ctx3, cancel3 := context.WithCancel(ctx)
	defer cancel3()
	r3 := async(func() error {
		return s.d.write(ctx3, func(tx *wtx) error {
			if _, err := tx.exec(ctx3, "SettingInsert", sql.Named("key", "three-a"), sql.Named("value", "v")); err != nil {
				return err
			}
			cancel3()
			_, err := tx.exec(ctx3, "SettingInsert", sql.Named("key", "three-b"), sql.Named("value", "v"))
			return err
		})
	})
	waitQueued(s.d, 3)
	r4 := async(putSetting(s, ctx, "four"))
	waitQueued(s.d, 4)
	r5 := async(putSetting(s, ctx5, "five"))
	waitQueued(s.d, 5)

	cancel2()
	if err := <-r2; !errors.Is(err, context.Canceled) {
		t.Errorf("request 2, canceled while queued: got %v, want %v", err, context.Canceled)
	}
	waitQueued(s.d, 4) // request 2 has left the queue
	g.release(t)

	for i, tc := range []struct {
		ch   <-chan error
		want error
	}{{r1, nil}, {r3, context.Canceled}, {r4, nil}, {r5, context.Canceled}} {
		if err := <-tc.ch; !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
			t.Errorf("request %d: got %v, want %v", []int{1, 3, 4, 5}[i], err, tc.want)
		}
	}
	want := map[string]bool{"one": true, "two": false, "three-a": false, "three-b": false, "four": true, "five": false}
	if diff := cmp.Diff(want, settingsSet(t, s, "one", "two", "three-a", "three-b", "four", "five")); diff != "" {
		t.Errorf("settings after the batch (-want +got):\n%s", diff)
	}
	got := s.d.WriteStats()
	if d := (WriteStats{Writes: got.Writes - before.Writes, Commits: got.Commits - before.Commits}); d != (WriteStats{Writes: 3, Commits: 2}) {
		t.Errorf("writes and commits: got %+v, want {Writes:3 Commits:2}", d)
	}
}

func TestGroupCommitPanicIsTheCallersAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, Options{Synchronous: "NORMAL"})

	g := blockWriter(t, s.d)
	r1 := async(putSetting(s, ctx, "one"))
	waitQueued(s.d, 1)
	r2 := async(func() (err error) {
		defer func() {
			if v := recover(); v != nil {
				err = fmt.Errorf("panic: %v", v)
			}
		}()
		return s.d.write(ctx, func(tx *wtx) error {
			if _, err := tx.exec(ctx, "SettingInsert", sql.Named("key", "two"), sql.Named("value", "v")); err != nil {
				return err
			}
			panic("bug")
		})
	})
	waitQueued(s.d, 2)
	r3 := async(putSetting(s, ctx, "three"))
	waitQueued(s.d, 3)
	g.release(t)

	if err := <-r1; err != nil {
		t.Errorf("request 1: %v", err)
	}
	if err := <-r2; err == nil || err.Error() != "panic: bug" {
		t.Errorf("request 2: got %v, want the panic re-raised in its caller", err)
	}
	if err := <-r3; err != nil {
		t.Errorf("request 3: %v", err)
	}
	want := map[string]bool{"one": true, "two": false, "three": true}
	if diff := cmp.Diff(want, settingsSet(t, s, "one", "two", "three")); diff != "" {
		t.Errorf("settings after the batch (-want +got):\n%s", diff)
	}
}

func TestGroupCommitLoneWriteHasNoSavepoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, Options{Synchronous: "NORMAL"})
	// A lone failing write is rolled back as a whole; the writer stays usable.
	boom := errors.New("boom")
	err := s.d.write(ctx, func(tx *wtx) error {
		if _, err := tx.exec(ctx, "SettingInsert", sql.Named("key", "x"), sql.Named("value", "v")); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("failing write: got %v, want %v", err, boom)
	}
	if _, err := s.SettingPutIfAbsent(ctx, "y", "v"); err != nil {
		t.Fatalf("next write: %v", err)
	}
	want := map[string]bool{"x": false, "y": true}
	if diff := cmp.Diff(want, settingsSet(t, s, "x", "y")); diff != "" {
		t.Errorf("settings (-want +got):\n%s", diff)
	}
	if got := s.d.WriteStats(); got.Writes != got.Commits {
		t.Errorf("sequential writes: got %+v, want one commit per write", got)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.SettingPutIfAbsent(canceled, "z", "v"); !errors.Is(err, context.Canceled) {
		t.Errorf("write with a canceled context: got %v, want %v", err, context.Canceled)
	}
}

// TestWriterKeepsTemporaryDataInMemory pins temp_store=MEMORY on the
// writer: the savepoints of group commit journal pages in the statement
// journal, which would otherwise spill to a temporary file.
func TestWriterKeepsTemporaryDataInMemory(t *testing.T) {
	t.Parallel()
	s := openTest(t, Options{Synchronous: "NORMAL"})
	var got int
	if err := s.d.w.QueryRowContext(context.Background(), "PRAGMA temp_store").Scan(&got); err != nil {
		t.Fatalf("PRAGMA temp_store: %v", err)
	}
	if got != 2 {
		t.Errorf("writer PRAGMA temp_store: got %d, want 2 (MEMORY)", got)
	}
}

// TestGroupCommitSurvivesALostTransaction: when SQLite ends the shared
// transaction under a request (as it does after an I/O error or a full
// disk), the requests already run in it get an error, as their work is
// gone, and the ones not yet run go on in a fresh transaction.
func TestGroupCommitSurvivesALostTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, Options{Synchronous: "NORMAL"})
	lost := errors.New("disk full")

	g := blockWriter(t, s.d)
	r1 := async(putSetting(s, ctx, "one"))
	waitQueued(s.d, 1)
	r2 := async(func() error {
		return s.d.write(ctx, func(tx *wtx) error {
			if _, err := tx.b.tx.Exec("ROLLBACK"); err != nil { // what SQLite does on SQLITE_FULL
				return err
			}
			return lost
		})
	})
	waitQueued(s.d, 2)
	r3 := async(putSetting(s, ctx, "three"))
	waitQueued(s.d, 3)
	g.release(t)

	if err := <-r1; err == nil || !strings.Contains(err.Error(), "shared write transaction") {
		t.Errorf("request 1, run before the transaction was lost: got %v, want a shared write transaction error", err)
	}
	if err := <-r2; !errors.Is(err, lost) {
		t.Errorf("request 2: got %v, want %v", err, lost)
	}
	if err := <-r3; err != nil {
		t.Errorf("request 3, run after: %v", err)
	}
	want := map[string]bool{"one": false, "three": true}
	if diff := cmp.Diff(want, settingsSet(t, s, "one", "three")); diff != "" {
		t.Errorf("settings (-want +got):\n%s", diff)
	}
	if _, err := s.SettingPutIfAbsent(ctx, "four", "v"); err != nil {
		t.Errorf("a later write: %v", err)
	}
}
