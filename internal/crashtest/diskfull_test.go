package crashtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
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
	// Not under t.TempDir, whose parent is closed to others: PostgreSQL
	// runs as another user and must reach its pg_wal here.
	dir, err := os.MkdirTemp("", "clasp-smallfs-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // #nosec G302 -- a mount point other users must traverse
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0755", "clasp-diskfull", dir).CombinedOutput(); err != nil {
		_ = os.Remove(dir)
		cannot(fmt.Sprintf("mount -t tmpfs: %v: %s", err, strings.TrimSpace(string(out))))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			// Still busy (a child outlived its kill): detach it, so the
			// directory can go; the memory is freed when the last user ends.
			if out2, err2 := exec.Command("umount", "-l", dir).CombinedOutput(); err2 != nil {
				t.Errorf("umount %s: %v: %s; umount -l: %v: %s", dir, err, out, err2, out2)
				return
			}
		}
		_ = os.RemoveAll(dir)
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
var unlimitedArgs = []string{"--rate-address", "-1", "--rate-credential", "-1", "--rate-comments-per-agent", "-1", "--rate-creates-per-agent", "-1"}

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

	// Concurrent writes share group commits whose COMMIT fails: each is
	// answered 200 or the same 503, never a 500.
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for n := range 10 {
				c, err := board.CommentCreate(ctx, f.issues[0].ID, client.CommentCreateRequest{Body: fmt.Sprintf("concurrent %d/%d %s", w, n, pad)})
				if e := clasp.AsError(err); err != nil && (e == nil || e.Code != clasp.CodeUnavailable || e.Details["reason"] != "disk_full") {
					t.Errorf("concurrent comment on a full disk: %v; want 200 or 503 disk_full", err)
				}
				if err == nil {
					mu.Lock()
					acked = append(acked, c.ID)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()

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

	// The operator's log says when it began and when it ended.
	if l := log.tail(2000); !strings.Contains(l, "the disk under the database is full") || !strings.Contains(l, "writes are committed again") {
		t.Errorf("the server log does not say the disk filled and writes resumed")
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

// walCluster is a PostgreSQL cluster of the test's own, on loopback, whose
// pg_wal is on a small filesystem.
type walCluster struct {
	bin, data, log, sock string
	port                 int
	wal                  string // the small filesystem holding pg_wal
	as                   []string
}

// newWALCluster initdbs a cluster (1 MiB WAL segments, max_wal_size 8 MB)
// with pg_wal on a 48 MiB tmpfs, starts it, creates database clasp and a
// replication slot that holds every WAL segment;
// it is stopped at cleanup. PostgreSQL refuses to run as root, so under
// root it runs as the user claspci (.ci/run creates it). It returns the
// cluster and the database's URL.
func newWALCluster(t *testing.T) (*walCluster, string) {
	t.Helper()
	wal := smallFilesystem(t, "48m")
	c := &walCluster{bin: filepath.Dir(pgTool(t, "initdb")), wal: wal}
	if os.Geteuid() == 0 {
		if _, err := exec.Command("id", "claspci").CombinedOutput(); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("no user claspci to run PostgreSQL as (.ci/run creates it)")
			}
			t.Skip("no user claspci to run PostgreSQL as (initdb refuses root; .ci/run creates the user)")
		}
		c.as = []string{"runuser", "-u", "claspci", "--"}
	}
	dir, err := os.MkdirTemp("", "clasp-walfull-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	c.data, c.log, c.sock = filepath.Join(dir, "data"), filepath.Join(dir, "log"), dir
	if c.as != nil {
		for _, d := range []string{dir, wal} {
			if out, err := exec.Command("chown", "claspci", d).CombinedOutput(); err != nil {
				t.Fatalf("chown %s: %v: %s", d, err, out)
			}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.port = ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close() // the port is PostgreSQL's now
	c.run(t, "initdb", "-D", c.data, "--waldir", filepath.Join(wal, "pg_wal"), "--wal-segsize=1", "-U", "clasp", "--auth=trust", "-E", "UTF8")
	c.start(t)
	t.Cleanup(func() { c.ctl("-m", "immediate", "stop") })
	c.run(t, "createdb", "-h", "127.0.0.1", "-p", fmt.Sprint(c.port), "-U", "clasp", "clasp")
	// A replication slot nobody reads keeps every WAL segment from now on
	// (as a standby that went away does), so that recycled segments cannot
	// absorb the writes and pg_wal must grow until the disk is full.
	c.run(t, "psql", "-h", "127.0.0.1", "-p", fmt.Sprint(c.port), "-U", "clasp", "-d", "clasp", "-v", "ON_ERROR_STOP=1",
		"-c", "SELECT pg_create_physical_replication_slot('clasp_test_hold', true)")
	return c, fmt.Sprintf("postgres://clasp@127.0.0.1:%d/clasp?sslmode=disable", c.port)
}

func (c *walCluster) cmd(name string, args ...string) *exec.Cmd {
	argv := append(append(append([]string(nil), c.as...), filepath.Join(c.bin, name)), args...)
	return exec.Command(argv[0], argv[1:]...) // #nosec G204 -- PostgreSQL's own programs, without a shell
}

func (c *walCluster) run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := c.cmd(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out)
	}
}

// ctl runs pg_ctl on the cluster and returns its error.
func (c *walCluster) ctl(args ...string) error {
	out, err := c.cmd("pg_ctl", append([]string{"-D", c.data, "-l", c.log}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

func (c *walCluster) start(t *testing.T) {
	t.Helper()
	if err := c.ctl("-w", "-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_wal_size=8MB -c min_wal_size=2MB", c.port, c.sock), "start"); err != nil {
		t.Fatal(err)
	}
}

// running reports whether the cluster's postmaster runs.
func (c *walCluster) running() bool { return c.ctl("status") == nil }

// TestDiskFull_PostgresWAL runs a real `clasp serve` on a PostgreSQL
// cluster of the test's own whose pg_wal is on a 48 MiB tmpfs, and fills
// that filesystem. PostgreSQL then refuses the write that needs a new WAL
// segment (53100) and stops itself with a PANIC; it cannot finish its
// restart without WAL space, so it stays down. Every answer meanwhile is
// 200 (written before the disk filled) or 503 unavailable, never a 500.
// Once the space is freed and PostgreSQL started again (the operator's
// step; clasp is not restarted), the same clasp process serves writes
// again, every acknowledged write is there and every issue satisfies L7.
func TestDiskFull_PostgresWAL(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts a filesystem and runs PostgreSQL and a real server; skipped with -short")
	}
	ctx := t.Context()
	pg, dbURL := newWALCluster(t)
	log := &syncBuffer{}
	args := append([]string{"--data-dir", filepath.Join(t.TempDir(), "data"), "--database-url", dbURL, "--lease-ttl", "5m"}, unlimitedArgs...)
	srv := startServer(t, args, log)
	hc := newHTTPClient()
	board := client.New(srv.URL(), client.WithToken(srv.BoardToken()), client.WithHTTPClient(hc))
	f := setUp(t, ctx, board, srv.URL(), hc, 2, 3)
	agent := client.New(srv.URL(), client.WithToken(f.runs[0].RunToken), client.WithHTTPClient(hc))
	todo := []clasp.IssueStatus{clasp.IssueTodo}
	if _, err := agent.IssueCheckout(ctx, f.issues[0].ID, client.CheckoutRequest{AgentID: f.agents[0].ID, ExpectedStatuses: todo}); err != nil {
		t.Fatalf("checkout before the disk fills: %v", err)
	}

	filler := fillDisk(t, pg.wal)
	pad := strings.Repeat("x", 8000)
	var acked []string
	refused := 0
	for i := 0; i < 4000 && refused < 20; i++ {
		c, err := board.CommentCreate(ctx, f.issues[0].ID, client.CommentCreateRequest{Body: fmt.Sprintf("comment %d %s", i, pad)})
		switch e := clasp.AsError(err); {
		case err == nil:
			acked = append(acked, c.ID)
		case e != nil && e.Code == clasp.CodeUnavailable:
			if refused == 0 {
				t.Logf("first refusal after %d acknowledged comments: %v %v", len(acked), e, e.Details)
			}
			refused++
		default:
			t.Fatalf("comment %d with pg_wal full: %v; want 200, or 503 unavailable", i, err)
		}
	}
	if refused == 0 {
		t.Fatalf("4000 comments of 8 KB were all stored with pg_wal on a full 48 MiB filesystem: the disk never refused a write")
	}
	if _, err := agent.IssueRelease(ctx, f.issues[0].ID, client.ReleaseRequest{}); err != nil && clasp.ErrorCode(err) != clasp.CodeUnavailable {
		t.Errorf("release with pg_wal full: %v; want 200 or 503 unavailable", err)
	}
	if _, err := board.IssueGet(ctx, f.issues[0].ID); err != nil && clasp.ErrorCode(err) != clasp.CodeUnavailable {
		t.Errorf("read with pg_wal full: %v; want 200 or 503 unavailable", err)
	}
	t.Logf("PostgreSQL running after the refusals: %v", pg.running())

	// Space freed; PostgreSQL started again if it stopped. clasp carries on.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	var c *clasp.Comment
	var err error
	for range 600 { // the pool reconnects on the next request; a bound, not a timing check
		if !pg.running() { // it stopped for good when its restart found no WAL space
			pg.start(t)
		}
		if c, err = board.CommentCreate(ctx, f.issues[1].ID, client.CommentCreateRequest{Body: "after the disk was freed"}); clasp.ErrorCode(err) != clasp.CodeUnavailable {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("write after freeing pg_wal and starting PostgreSQL: %v", err)
	}
	acked = append(acked, c.ID)

	got := map[string]bool{}
	for _, iss := range f.issues[:2] {
		cs, err := board.CommentList(ctx, iss.ID, client.CommentListParams{Limit: 1000})
		if err != nil {
			t.Fatalf("list comments: %v", err)
		}
		for _, c := range cs {
			got[c.ID] = true
		}
	}
	for _, id := range acked {
		if !got[id] {
			t.Errorf("acknowledged comment %s is missing", id)
		}
	}
	checkLocks(t, ctx, board, f.company.ID, "after pg_wal was freed")
	if _, err := client.New(srv.URL(), client.WithToken(f.runs[1].RunToken), client.WithHTTPClient(hc)).IssueCheckout(ctx, f.issues[2].ID,
		client.CheckoutRequest{AgentID: f.agents[1].ID, ExpectedStatuses: todo}); err != nil {
		t.Errorf("checkout after pg_wal was freed: %v", err)
	}
	t.Logf("%d comments acknowledged, %d refused with 503", len(acked), refused)
}

// TestBackupOntoFullDisk: `clasp backup --to` a 1 MiB tmpfs, smaller than
// the database, fails with a message naming the full disk and what to do,
// and leaves nothing on it (no FILE, no temporary file); the server goes on
// serving writes.
func TestBackupOntoFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts a filesystem and runs a real server; skipped with -short")
	}
	ctx := t.Context()
	small := smallFilesystem(t, "1m")
	dataDir := filepath.Join(t.TempDir(), "data")
	log := &syncBuffer{}
	srv := startServer(t, append([]string{"--data-dir", dataDir}, unlimitedArgs...), log)
	hc := newHTTPClient()
	board := client.New(srv.URL(), client.WithToken(srv.BoardToken()), client.WithHTTPClient(hc))
	f := setUp(t, ctx, board, srv.URL(), hc, 1, 1)
	pad := strings.Repeat("x", 4096)
	for i := range 400 { // about 2 MiB of comments
		if _, err := board.CommentCreate(ctx, f.issues[0].ID, client.CommentCreateRequest{Body: fmt.Sprintf("%d %s", i, pad)}); err != nil {
			t.Fatal(err)
		}
	}
	to := filepath.Join(small, "clasp-backup.db")
	out, err := exec.CommandContext(ctx, claspBin, "backup", "--data-dir", dataDir, "--to", to).CombinedOutput() // #nosec G204 -- the binary under test
	if err == nil || !strings.Contains(string(out), "is full; free space there or choose another --to") {
		t.Errorf("clasp backup onto a full disk: %v\n%s\nwant a failure naming the full disk", err, out)
	}
	entries, err := os.ReadDir(small)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("left on the small filesystem after the failed backup: %s", e.Name())
	}
	if _, err := board.CommentCreate(ctx, f.issues[0].ID, client.CommentCreateRequest{Body: "after the failed backup"}); err != nil {
		t.Errorf("write after the failed backup: %v", err)
	}
}
