package swarm_test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/clasp-dev/clasp/internal/swarm"
)

// claspBin is the clasp binary built once by TestMain: the end-to-end tests
// run it as real OS processes, as a user would.
var claspBin string

func TestMain(m *testing.M) {
	code := func() int {
		dir, err := os.MkdirTemp("", "clasp-swarm-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		claspBin = filepath.Join(dir, "clasp")
		out, err := exec.Command("go", "build", "-o", claspBin, "github.com/clasp-dev/clasp/cmd/clasp").CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "build clasp: %v\n%s", err, out)
			return 1
		}
		code := m.Run()
		if code == 0 {
			if err := goleak.Find(); err != nil {
				fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
				return 1
			}
		}
		return code
	}()
	os.Exit(code)
}

// writeTree writes n files of random content (1 B to 4 KiB) in nested
// directories under dir, plus a .git and a node_modules directory the
// swarm must skip.
func writeTree(t *testing.T, dir string, n int) {
	t.Helper()
	for i := range n {
		sub := filepath.Join(dir, fmt.Sprintf("d%d", i%5), fmt.Sprintf("e%d", i%3))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 1+i*67%4096)
		_, _ = rand.Read(b)
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%03d.bin", i)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, ".git", "objects"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".git", "objects", "skip-me"), []byte("not work"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "d1", "node_modules", "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "d1", "node_modules", "pkg", "index.js"), []byte("not work"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "d0"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
}

// runSwarm runs `clasp swarm args... --json`, logs its stderr, and returns
// its report and stderr; it fails the test when the swarm exits non-zero
// or its report cannot be read.
func runSwarm(t *testing.T, args ...string) (swarm.Report, string) {
	t.Helper()
	cmd := exec.Command(claspBin, append(append([]string{"swarm"}, args...), "--json")...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("stderr:\n%s", stderr.String())
	if err != nil {
		t.Fatalf("clasp swarm %s: %v\nstdout:\n%s", strings.Join(args, " "), err, stdout.String())
	}
	var rep swarm.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("decode report: %v\n%s", err, stdout.String())
	}
	return rep, stderr.String()
}

// wantProgressDone checks that the last progress line on stderr
// ("swarm: done N/M ...") counts what the report counts: N is the report's
// done issues and M its issues.
func wantProgressDone(t *testing.T, stderr string, rep swarm.Report) {
	t.Helper()
	var last string
	for _, line := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(line, "swarm: done ") {
			last = line
		}
	}
	var done, total int
	if _, err := fmt.Sscanf(last, "swarm: done %d/%d", &done, &total); err != nil {
		t.Errorf("last progress line %q: want \"swarm: done N/M ...\" (%v)", last, err)
		return
	}
	if done != rep.Done || total != rep.Issues {
		t.Errorf("last progress line %q: done %d/%d, report %d done of %d issues; want the same counts", last, done, total, rep.Done, rep.Issues)
	}
}

// TestSwarmSurvivesKills runs `clasp swarm` on 60 files with 4 agents, a
// third of whose checkouts are answered by a SIGKILL in the middle of the
// work (scenario S24 at scale): it must exit 0 with every check passed.
func TestSwarmSurvivesKills(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, 60)
	rep, stderr := runSwarm(t, "--dir", dir, "--agents", "4", "--kill-rate", "0.3", "--slow", "20ms",
		"--lease-ttl", "1s", "--sweep-interval", "200ms", "--timeout", "4m")
	if rep.Issues != 60 || rep.Done != 60 {
		t.Errorf("issues %d, done %d; want 60, 60", rep.Issues, rep.Done)
	}
	wantProgressDone(t, stderr, rep)
	if rep.Kills == 0 {
		t.Errorf("kills = 0, want > 0 (kill rate 0.3 over 60 checkouts)")
	}
	if rep.ProcessesStarted != 4+rep.Kills {
		t.Errorf("processes started %d, want 4 agents + %d kills", rep.ProcessesStarted, rep.Kills)
	}
	// With --slow 20ms the kills land during the work, so the killed
	// processes leave runs for the sweeper and locks to adopt or sweep.
	if rep.Kills > 0 && (rep.RunsLost == 0 || rep.Adoptions+rep.StaleLocksCleared == 0) {
		t.Errorf("%d kills but %d runs lost, %d adoptions, %d stale locks swept; want recoveries", rep.Kills, rep.RunsLost, rep.Adoptions, rep.StaleLocksCleared)
	}
	if rep.CheckedOut < 60 {
		t.Errorf("checkouts %d, want at least one per issue", rep.CheckedOut)
	}
	if len(rep.Violations) != 0 {
		t.Errorf("violations: %v", rep.Violations)
	}
}

// TestSwarmDepsSurvivesKills runs `clasp swarm --deps` on a tree of 40
// files in nested directories with 4 agents and kills: every file and
// directory issue is done once, the root's result is the tree hash, no
// issue entered in_progress or done before its blockers, and each
// directory's ready state woke its agent once (the report's wakes equal
// its directories).
func TestSwarmDepsSurvivesKills(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, 40)
	rep, stderr := runSwarm(t, "--deps", "--dir", dir, "--agents", "4", "--kill-rate", "0.3", "--slow", "20ms",
		"--lease-ttl", "1s", "--sweep-interval", "200ms", "--timeout", "4m")
	if rep.Deps == nil || rep.Deps.Dirs < 2 || rep.Deps.Edges != rep.Issues-1 || rep.Deps.Wakes != rep.Deps.Dirs || rep.Deps.RootHash == "" {
		t.Fatalf("dependency report %+v of %d issues: want the directories, one edge per issue but the root, one wake per directory", rep.Deps, rep.Issues)
	}
	if rep.Issues != 40+rep.Deps.Dirs || rep.Done != rep.Issues {
		t.Errorf("issues %d, done %d; want 40 files + %d directories, all done", rep.Issues, rep.Done, rep.Deps.Dirs)
	}
	wantProgressDone(t, stderr, rep)
	if rep.Kills == 0 {
		t.Errorf("kills = 0, want > 0")
	}
	if len(rep.Violations) != 0 {
		t.Errorf("violations: %v", rep.Violations)
	}
}

// TestSwarmManagedSurvivesKills runs `clasp swarm --managed` on 20 files
// with 3 server-managed agents, 30% of whose run processes are SIGKILLed
// : the server's process-loss handling (process_lost, one retry)
// must carry the work on, and every end-of-run check must hold.
func TestSwarmManagedSurvivesKills(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, 20)
	rep, stderr := runSwarm(t, "--managed", "--dir", dir, "--agents", "3", "--kill-rate", "0.3",
		"--lease-ttl", "2s", "--sweep-interval", "200ms", "--timeout", "3m")
	if !rep.Managed || rep.Issues != 20 || rep.Done != 20 {
		t.Errorf("managed %v, issues %d, done %d; want true, 20, 20", rep.Managed, rep.Issues, rep.Done)
	}
	wantProgressDone(t, stderr, rep)
	// One issue per run: at least one process per issue.
	if rep.ProcessesStarted < 20 {
		t.Errorf("processes started %d, want at least 20 (one issue per run)", rep.ProcessesStarted)
	}
	// Every kill is a process loss the server saw (run.lost), and each
	// retried run was retried once.
	if rep.Kills > 0 && rep.RunsLost == 0 {
		t.Errorf("%d kills but no run lost", rep.Kills)
	}
	if rep.Recoveries > rep.Kills {
		t.Errorf("%d retries seen after %d kills", rep.Recoveries, rep.Kills)
	}
	if len(rep.Violations) != 0 || len(rep.AgentFailures) != 0 {
		t.Errorf("violations: %v; agent failures: %v", rep.Violations, rep.AgentFailures)
	}
}

// TestSwarmMCPSurvivesKills runs `clasp swarm --mcp` on 30 files with 3
// agents, each an MCP client of a `clasp mcp` process; a third of the
// checkouts are answered by a SIGKILL of the agent (its `clasp mcp` dies
// with it): every end-of-run check must hold and the killed sessions' runs
// must be left to the lease.
func TestSwarmMCPSurvivesKills(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, 30)
	rep, _ := runSwarm(t, "--mcp", "--dir", dir, "--agents", "3", "--kill-rate", "0.3", "--slow", "20ms",
		"--lease-ttl", "1s", "--sweep-interval", "200ms", "--timeout", "4m")
	if !rep.MCP || rep.Issues != 30 || rep.Done != 30 {
		t.Errorf("mcp %v, issues %d, done %d; want true, 30, 30", rep.MCP, rep.Issues, rep.Done)
	}
	if rep.Kills > 0 && rep.RunsLost == 0 {
		t.Errorf("%d kills but no run lost: a killed agent's clasp mcp finished its run instead of leaving it to the lease", rep.Kills)
	}
	if len(rep.Violations) != 0 || len(rep.AgentFailures) != 0 {
		t.Errorf("violations: %v; agent failures: %v", rep.Violations, rep.AgentFailures)
	}
}

// TestSwarmManagedPaperclipAgent runs the Paperclip-style shell agent
// (examples/paperclip-agent: only PAPERCLIP_* variables and Paperclip's
// paths) as the server's agents, 30% of whose processes are SIGKILLed
// during their work: every issue done once, no violation.
func TestSwarmManagedPaperclipAgent(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"curl", "jq", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the Paperclip example needs %s: %v", tool, err)
		}
	}
	agent, err := filepath.Abs("../../examples/paperclip-agent/agent.sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeTree(t, dir, 12)
	cmd := exec.Command(claspBin, "swarm", "--managed", "--dir", dir, "--agents", "3", "--kill-rate", "0.3", "--slow", "200ms",
		"--agent-command", "/bin/sh,"+agent+",0.2", "--lease-ttl", "2s", "--sweep-interval", "200ms", "--timeout", "3m", "--json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	t.Logf("stderr:\n%s", stderr.String())
	if err != nil {
		t.Fatalf("clasp swarm --managed --agent-command: %v\nstdout:\n%s", err, stdout.String())
	}
	var rep swarm.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("decode report: %v\n%s", err, stdout.String())
	}
	if !rep.Managed || rep.Issues != 12 || rep.Done != 12 {
		t.Errorf("managed %v, issues %d, done %d; want true, 12, 12", rep.Managed, rep.Issues, rep.Done)
	}
	if rep.Kills > 0 && rep.RunsLost == 0 {
		t.Errorf("%d kills but no run lost", rep.Kills)
	}
	if len(rep.Violations) != 0 || len(rep.AgentFailures) != 0 {
		t.Errorf("violations: %v; agent failures: %v", rep.Violations, rep.AgentFailures)
	}
}

// TestReportGitPushes: the report's line of branch pushes gives the
// accepted and the refused pushes each with its count, the refusals split
// by reason.
func TestReportGitPushes(t *testing.T) {
	rep := swarm.Report{Git: &swarm.GitTally{Pushes: 8, PushesRefused: map[string]int{"superseded": 1, "dead_holder": 2}}}
	var b bytes.Buffer
	rep.WriteText(&b)
	if want := "branch pushes       8 accepted, 3 refused (dead_holder 2, superseded 1)\n"; !strings.Contains(b.String(), want) {
		t.Errorf("report:\n%s\nwant the line %q", b.String(), want)
	}
}

// TestSwarmInterrupted: `clasp swarm` stopped by SIGINT while its agents
// work exits 130 with one line saying it was interrupted, how many agent
// processes it stopped, and that its temporary run directory is removed;
// the directory is gone.
func TestSwarmInterrupted(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, 20)
	cmd := exec.Command(claspBin, "swarm", "--dir", dir, "--agents", "2", "--kill-rate", "0", "--slow", "2s")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(stderr)
	dataDir := ""
	for sc.Scan() {
		line := sc.Text()
		lines = append(lines, line)
		if _, d, ok := strings.Cut(line, "data in "); ok && dataDir == "" {
			dataDir = d
		}
		// The first progress line comes once the agents have started.
		if strings.HasPrefix(line, "swarm: done ") {
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	err = cmd.Wait()
	out := strings.Join(lines, "\n")
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Fatalf("clasp swarm after SIGINT: %v, want exit 130; stderr:\n%s", err, out)
	}
	var last string
	for _, l := range lines {
		if strings.HasPrefix(l, "swarm: interrupted: ") {
			last = l
		}
	}
	var stopped int
	if _, err := fmt.Sscanf(last, "swarm: interrupted: stopped %d agent process(es);", &stopped); err != nil || stopped < 1 ||
		dataDir == "" || !strings.HasSuffix(last, "the run directory "+dataDir+" is removed (--keep keeps it)") {
		t.Errorf("interrupted line %q (%v): want the agent processes stopped (at least 1) and the run directory %q removed; stderr:\n%s", last, err, dataDir, out)
	}
	if _, err := os.Stat(dataDir); dataDir != "" && !os.IsNotExist(err) {
		t.Errorf("the run directory %s is still there (%v)", dataDir, err)
	}
}
