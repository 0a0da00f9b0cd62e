package swarm_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/serveproc"
	"github.com/clasp-dev/clasp/internal/swarm"
)

// TestSwarmGit runs `clasp swarm --git` on 16 files with 3 agents, kills
// and freezes, on SQLite: it must exit 0 (main holds exactly one result
// commit per issue, stamped with the epoch that completed it, with the
// file's hash; no push of a hold swept while frozen was accepted; no
// worktree served two runs), and its counts must agree with each other.
// The swarm's first checkout always freezes, so there is a frozen holder
// whose run is swept and whose push, when it wakes, the gate refuses.
func TestSwarmGit(t *testing.T) {
	t.Parallel()
	needGit(t)
	dir := t.TempDir()
	writeTree(t, dir, 16)
	rep, stderr := runSwarm(t, "--git", "--dir", dir, "--agents", "3", "--kill-rate", "0.2", "--freeze-rate", "0.1",
		"--slow", "300ms", "--lease-ttl", "2s", "--sweep-interval", "300ms", "--timeout", "4m")
	wantProgressDone(t, stderr, rep)
	wantGitReport(t, rep, 16)
}

// TestSwarmGitAcrossReplicas is TestSwarmGit on PostgreSQL with 3
// replicas of `clasp serve`. Skipped without CLASP_TEST_POSTGRES_URL,
// unless CI is set.
func TestSwarmGitAcrossReplicas(t *testing.T) {
	needGit(t)
	admin := os.Getenv(serveproc.EnvTestPostgresURL)
	if admin == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set, and CI is: the PostgreSQL tests must run in CI", serveproc.EnvTestPostgresURL)
		}
		t.Skipf("%s is not set: no PostgreSQL to test against", serveproc.EnvTestPostgresURL)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	dbURL, drop, err := serveproc.CreateDatabase(ctx, admin, "clasp_swarm_git")
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := drop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	dir := t.TempDir()
	writeTree(t, dir, 16)
	t.Setenv("CLASP_TOKEN", "")
	rep, _ := runSwarm(t, "--git", "--dir", dir, "--database-url", dbURL, "--replicas", "3", "--agents", "3",
		"--kill-rate", "0.2", "--freeze-rate", "0.1", "--slow", "300ms", "--lease-ttl", "2s", "--sweep-interval", "300ms", "--timeout", "4m")
	if rep.Replicas != 3 {
		t.Errorf("replicas %d, want 3", rep.Replicas)
	}
	wantGitReport(t, rep, 16)
}

func needGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("git is not installed, and CI is: the git swarm must run in CI")
		}
		t.Skip("git is not installed")
	}
}

// wantGitReport checks a git swarm's report of n issues: all done, no
// violation, one result commit per issue on main, each merged by its
// agent or landed by the swarm, at least one freeze whose run was swept
// and a stale push refused, and counts that agree.
func wantGitReport(t *testing.T, rep swarm.Report, n int) {
	t.Helper()
	if len(rep.Violations) != 0 {
		t.Errorf("violations: %v", rep.Violations)
	}
	if rep.Issues != n || rep.Done != n {
		t.Errorf("issues %d, done %d; want %d, %d", rep.Issues, rep.Done, n, n)
	}
	g := rep.Git
	if g == nil {
		t.Fatal("no git counts in the report")
	}
	t.Logf("git: %+v", *g)
	if g.MainCommits != n {
		t.Errorf("%d stamped commits on main, want %d", g.MainCommits, n)
	}
	if g.Merges+g.Landed != n {
		t.Errorf("%d merges by the agents + %d landed by the swarm, want %d", g.Merges, g.Landed, n)
	}
	if g.Pushes < n || g.Commits < g.Pushes {
		t.Errorf("%d commits, %d accepted branch pushes: want at least one push per issue, and a commit for each push", g.Commits, g.Pushes)
	}
	if g.Freezes < 1 || g.FrozenSwept < 1 {
		t.Errorf("%d freezes, %d swept before waking; want at least one of each (the first checkout freezes)", g.Freezes, g.FrozenSwept)
	}
	if g.StalePushesRefused < 1 || g.FrozenPushesRefused < 1 {
		t.Errorf("%d stale pushes refused, %d of them by frozen holds; want at least one", g.StalePushesRefused, g.FrozenPushesRefused)
	}
	refused := 0
	for reason, k := range g.PushesRefused {
		if reason != clasp.GateSuperseded && reason != clasp.GateDeadHolder && reason != clasp.GateNotHeld {
			t.Errorf("%d pushes refused as %s; want only superseded, dead or swept holders refused", k, reason)
		}
		refused += k
	}
	if refused != g.StalePushesRefused {
		t.Errorf("%d refusals by reason, %d stale refusals", refused, g.StalePushesRefused)
	}
}

// TestSwarmGitInterruptContinuesFrozen interrupts (SIGINT) a git swarm
// while an agent is frozen: with a 30 s lease the freeze would last at
// least that long, so the SIGCONT the swarm logs can only be the one its
// stopping sends, and the frozen process is not left stopped.
func TestSwarmGitInterruptContinuesFrozen(t *testing.T) {
	t.Parallel()
	needGit(t)
	dir := t.TempDir()
	writeTree(t, dir, 6)
	cmd := exec.Command(claspBin, "swarm", "--git", "--dir", dir, "--agents", "2", "--kill-rate", "0", "--freeze-rate", "0.01",
		"--slow", "300ms", "--lease-ttl", "30s", "--timeout", "2m")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(stderr)
	var agent, pid int
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if _, err := fmt.Sscanf(sc.Text(), "swarm: froze agent %d (pid %d,", &agent, &pid); err == nil {
			break
		}
	}
	if pid == 0 {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("no freeze announced:\n%s", strings.Join(lines, "\n"))
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	err = cmd.Wait()
	out := strings.Join(lines, "\n")
	if err == nil {
		t.Errorf("an interrupted swarm exited 0:\n%s", out)
	}
	want := fmt.Sprintf("swarm: continued agent %d (pid %d, SIGCONT): the swarm is stopping", agent, pid)
	if !strings.Contains(out, want) {
		t.Errorf("stderr has no line %q:\n%s", want, out)
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// pid (comm) state ...: a process that outlived the swarm must
		// not be stopped.
		if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); len(f) > 0 && f[0] == "T" {
			t.Errorf("agent process %d is still stopped after the swarm ended", pid)
		}
	}
}
