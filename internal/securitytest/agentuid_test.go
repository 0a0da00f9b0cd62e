package securitytest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// rootOrSkip skips a test that needs root (serve --agent-uid-range) when
// the suite does not run as root, but fails it in CI (CI set), which runs
// the suite as root.
func rootOrSkip(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("serve --agent-uid-range needs root, and CI runs the suite as root; it runs as uid %d", os.Geteuid())
	}
	t.Skipf("serve --agent-uid-range needs root (the suite runs as uid %d); CI runs it as root", os.Geteuid())
}

// uidRange is a range of 1000 uids of its own for a test's server (tests
// run in parallel, each server with its own database, so each gets its own
// range), far above the uids of accounts.
func uidRange() (first, last uint32) {
	first = 400_000 + 1000*rand.Uint32N(100_000)
	return first, first + 999
}

// agentIn creates an agent named name in company coID whose adapter runs
// /bin/sh -c script with env.
func (s *server) agentIn(t *testing.T, coID, name, script string, env map[string]string) *clasp.Agent {
	t.Helper()
	ctx := context.Background()
	ag, err := s.board().AgentCreate(ctx, coID, client.AgentCreateRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.board().AgentSetAdapter(ctx, ag.ID, &clasp.AdapterConfig{Type: clasp.AdapterProcess, Command: "/bin/sh",
		Args: []string{"-c", script}, Env: env, TimeoutSec: 120, Heartbeat: clasp.HeartbeatConfig{Enabled: true}}); err != nil {
		t.Fatal(err)
	}
	return ag
}

// waitStarted polls run id (a liveness bound, not a timing assertion)
// until its pid is recorded and its log holds "started", and returns it.
func (s *server) waitStarted(t *testing.T, id string) *clasp.Run {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r, err := s.board().RunGet(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if r.PID != nil && strings.Contains(s.runLog(t, id), "started") {
			return r
		}
		if r.Status.Terminal() || time.Now().After(deadline) {
			t.Fatalf("run %s never started (%s); log:\n%s\nserver output:\n%s", id, r.Status, s.runLog(t, id), s.output())
		}
	}
}

// procTree is pid and its live descendants, from /proc/<pid>/stat (ppid).
func procTree(pid int) []int {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		p, _ := strconv.Atoi(e.Name())
		pp, _ := strconv.Atoi(f[1])
		children[pp] = append(children[pp], p)
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// procUID is the real uid of process pid (-1 if unknown).
func procUID(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	_, rest, _ := strings.Cut(string(b), "\nUid:")
	f := strings.Fields(rest)
	if len(f) == 0 {
		return -1
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return -1
	}
	return n
}

// victimScript is a managed agent that only waits, holding its run token
// in its environment like any agent.
const victimScript = `echo started; exec sleep 300`

// spyScript is a managed agent of a hostile company: it reads every
// /proc/<pid>/environ it can and reports each one holding another run's
// CLASP_RUN_ID (LEAK), then tries kill -0 on every pid of $VICTIM_PIDS
// (SIGNALLED when the kernel lets it), and prints its uid and home.
const spyScript = `echo "== leaks"
for f in /proc/[0-9]*/environ; do
  v=$({ tr '\0' '\n' < "$f"; } 2>/dev/null | grep '^CLASP_RUN_ID=') || continue
  [ "$v" = "CLASP_RUN_ID=$CLASP_RUN_ID" ] && continue
  echo "LEAK $f $v"
done
echo "== kill"
for p in $VICTIM_PIDS; do
  if kill -0 "$p" 2>/dev/null; then echo "SIGNALLED $p"; else echo "refused $p"; fi
done
echo "== id"; id -u
echo "== groups"; id -G
echo "== home"; echo "$HOME"
echo "== end"`

// TestAgentUIDsIsolateAgents: with serve --agent-uid-range (as root), an
// agent of company C1 scans /proc/*/environ while an agent of company C2
// and another agent of C1 run, and tries kill -0 on every process of
// theirs: it reads no other run's environment (their run tokens) and may
// signal none of them. Each agent runs as a uid of its own from the range
// (gid the same, no supplementary group), stable across its runs, with a
// home <data-dir>/homes/<agentId> and a run directory, both 0700 and
// owned by that uid. With the old code every agent ran as the one
// --agent-user uid, whose processes may read each other's environment and
// signal each other (and --agent-uid-range did not exist).
func TestAgentUIDsIsolateAgents(t *testing.T) {
	t.Parallel()
	rootOrSkip(t)
	storeKinds(t, func(t *testing.T, databaseURL string) { testAgentUIDsIsolateAgents(t, databaseURL) })
}

func testAgentUIDsIsolateAgents(t *testing.T, databaseURL string) {
	first, last := uidRange()
	s := startServer(t, serveOpts{DatabaseURL: databaseURL, Args: []string{"--agent-uid-range", fmt.Sprintf("%d-%d", first, last)}, Traversable: true})
	if strings.Contains(s.output(), "running as root without --agent-uid-range or --agent-user") {
		t.Errorf("the server warned about root agents although --agent-uid-range is set:\n%s", s.output())
	}
	ctx := context.Background()
	b := s.board()
	c1, err := b.CompanyCreate(ctx, client.CompanyCreateRequest{Name: "C1 " + randHex(3), IssuePrefix: prefix()})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := b.CompanyCreate(ctx, client.CompanyCreateRequest{Name: "C2 " + randHex(3), IssuePrefix: prefix()})
	if err != nil {
		t.Fatal(err)
	}
	other := s.agentIn(t, c2.ID, "other-company", victimScript, nil)
	peer := s.agentIn(t, c1.ID, "same-company", victimScript, nil)

	var victimPIDs []string
	uids := map[int]string{} // uid -> agent
	for _, ag := range []*clasp.Agent{other, peer} {
		runID := s.wake(t, ag)
		r := s.waitStarted(t, runID)
		t.Cleanup(func() { _, _ = b.RunCancel(context.Background(), runID) })
		uid := procUID(*r.PID)
		if uid < int(first) || uid > int(last) {
			t.Errorf("agent %s runs as uid %d, want one of %d-%d", ag.Name, uid, first, last)
		}
		if prev, dup := uids[uid]; dup {
			t.Errorf("agents %s and %s share uid %d", prev, ag.Name, uid)
		}
		uids[uid] = ag.Name
		for _, pid := range procTree(*r.PID) {
			if got := procUID(pid); got != uid {
				t.Errorf("process %d of agent %s runs as uid %d, want %d", pid, ag.Name, got, uid)
			}
			victimPIDs = append(victimPIDs, strconv.Itoa(pid))
		}
		for _, d := range []string{filepath.Join(s.DataDir, "homes", ag.ID), filepath.Join(s.DataDir, "runs", runID)} {
			fi, err := os.Stat(d)
			if err != nil {
				t.Errorf("agent %s: %v", ag.Name, err)
				continue
			}
			if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o700 || int(st.Uid) != uid || int(st.Gid) != uid {
				t.Errorf("%s: mode %o owner %d:%d, want 0700 %d:%d", d, fi.Mode().Perm(), st.Uid, st.Gid, uid, uid)
			}
		}
	}
	if len(victimPIDs) < 4 {
		t.Fatalf("victim processes %v: want a shim and a command per victim", victimPIDs)
	}

	spy := s.agentIn(t, c1.ID, "spy", spyScript, map[string]string{"VICTIM_PIDS": strings.Join(victimPIDs, " ")})
	spyUID := ""
	for i := range 2 {
		runID := s.wake(t, spy)
		if r := s.waitRun(t, runID); r.Status != clasp.RunSucceeded {
			t.Fatalf("spy run %d ended %s (%v); log:\n%s", i, r.Status, r.Error, s.runLog(t, runID))
		}
		log := s.runLog(t, runID)
		if leaks := section(log, "leaks"); leaks != "" {
			t.Errorf("spy run %d read other runs' environments:\n%s", i, leaks)
		}
		kill := section(log, "kill")
		if strings.Contains(kill, "SIGNALLED") || strings.Count(kill, "refused") != len(victimPIDs) {
			t.Errorf("spy run %d: kill -0 on the other agents' processes %v:\n%s", i, victimPIDs, kill)
		}
		id := strings.TrimSpace(section(log, "id"))
		n, _ := strconv.Atoi(id)
		if _, taken := uids[n]; taken || n < int(first) || n > int(last) {
			t.Errorf("spy run %d ran as uid %q, want its own uid of %d-%d (others: %v)", i, id, first, last, uids)
		}
		if g := strings.TrimSpace(section(log, "groups")); g != id {
			t.Errorf("spy run %d has groups %q, want only its own gid %s", i, g, id)
		}
		if h := strings.TrimSpace(section(log, "home")); h != filepath.Join(s.DataDir, "homes", spy.ID) {
			t.Errorf("spy run %d has HOME %q, want %s", i, h, filepath.Join(s.DataDir, "homes", spy.ID))
		}
		if i == 1 && id != spyUID {
			t.Errorf("the spy's second run ran as uid %s, its first as %s: want the same", id, spyUID)
		}
		spyUID = id
	}
}

// TestAgentUIDStraysOfKilledShimEnd: with serve --agent-uid-range (as
// root), a run's watcher (its shim) is SIGKILLed while a descendant of its
// command that left the session (setsid) and cleared its environment (so
// that nothing names the run) still runs. The run is lost, and the
// descendant is gone soon after: the agent has no running run left, so
// the server kills every process of its uid. Before, nothing ended it.
func TestAgentUIDStraysOfKilledShimEnd(t *testing.T) {
	t.Parallel()
	rootOrSkip(t)
	first, last := uidRange()
	s := startServer(t, serveOpts{Args: []string{"--agent-uid-range", fmt.Sprintf("%d-%d", first, last)}, Traversable: true})
	ag := s.managedAgent(t, `setsid env -i /bin/sh -c 'exec sleep 1021' </dev/null >/dev/null 2>&1 &
echo "escaped $!"; echo started; exec sleep 1022`, nil)
	runID := s.wake(t, ag)
	r := s.waitStarted(t, runID)
	_, rest, _ := strings.Cut(s.runLog(t, runID), "escaped ")
	line, _, _ := strings.Cut(rest, "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("no escaped pid in the log: %q", s.runLog(t, runID))
	}
	t.Cleanup(func() {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && strings.Contains(string(b), "1021") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err != nil || !strings.Contains(string(b), "1021") {
		t.Fatalf("the escaped descendant %d is not running: %q, %v", pid, b, err)
	}
	if err := syscall.Kill(*r.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if got := s.waitRun(t, runID); got.Status != clasp.RunFailed {
		t.Errorf("run whose shim was killed ended %s, want failed (process lost)", got.Status)
	}
	// The retry of the lost run, if any, is ended so that the agent has no
	// running run: that is when its uid is swept.
	if runs, err := s.board().RunList(context.Background(), ag.CompanyID, client.RunListParams{}); err == nil {
		for _, x := range runs.Items {
			if x.ID != runID && !x.Status.Terminal() {
				_, _ = s.board().RunCancel(context.Background(), x.ID)
			}
		}
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !strings.Contains(string(b), "1021") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the setsid descendant %d (environment cleared) of the run whose shim was killed still runs 30 s later; server output:\n%s", pid, s.output())
		}
	}
}
