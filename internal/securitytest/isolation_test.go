package securitytest

import (
	"context"
	"errors"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
)

// dumpScript is a managed agent that shows what it can see: its
// environment, its working directory and its contents, and what it reads
// of the board token and the database at the paths relative to the
// server's working directory (.clasp/...) and absolute ($DATA_DIR/...).
// File contents are upper-cased so that run-log masking of clasp tokens
// cannot hide a leak.
const dumpScript = `echo "== env"; env
echo "== pwd"; pwd
echo "== ls"; ls -A
echo "== id"; id -u
echo "== ls data"; ls "$DATA_DIR" 2>&1
echo "== board rel"; cat .clasp/board-token 2>&1 | tr a-z A-Z
echo "== board abs"; cat "$DATA_DIR/board-token" 2>&1 | tr a-z A-Z
echo "== db rel"; head -c 15 .clasp/clasp.db 2>&1; echo
echo "== db abs"; head -c 15 "$DATA_DIR/clasp.db" 2>&1; echo
echo "== write"; touch ./written && echo wrote-own-dir
echo "== end"`

// section is the lines of log between "== name" and the next "== " line.
func section(log, name string) string {
	_, rest, ok := strings.Cut(log, "== "+name+"\n")
	if !ok {
		return "<section " + name + " missing>"
	}
	if strings.HasPrefix(rest, "== ") {
		return ""
	}
	body, _, _ := strings.Cut(rest, "\n== ")
	return body
}

// TestManagedAgentSeesNoServerSecret: a managed agent's environment is
// built from an allowlist (never the server's: its database URL, tokens
// and other secrets stay out), it starts in an empty working directory of
// its own under the data directory (removed when the run ends), and the
// board token and database at the server's relative paths are not there.
// On the old code the environment held every server variable and the
// agent ran in the server's directory, reading .clasp/board-token.
func TestManagedAgentSeesNoServerSecret(t *testing.T) {
	t.Parallel()
	storeKinds(t, func(t *testing.T, databaseURL string) {
		secrets := map[string]string{
			"AWS_SECRET_ACCESS_KEY": "aws-sentinel-" + randHex(8),
			"CLASP_TOKEN":           "token-sentinel-" + randHex(8),
			"PGPASSWORD":            "pgpass-sentinel-" + randHex(8),
		}
		var env []string
		for k, v := range secrets {
			env = append(env, k+"="+v)
		}
		s := startServer(t, serveOpts{DatabaseURL: databaseURL, Env: env})
		if databaseURL != "" {
			u, _ := url.Parse(databaseURL)
			secrets["CLASP_DATABASE_URL"] = strings.TrimPrefix(u.Path, "/") // the random database name
		}
		ag := s.managedAgent(t, dumpScript, map[string]string{"DATA_DIR": s.DataDir, "ADAPTER_VAR": "from-adapter"})
		runID := s.wake(t, ag)
		if r := s.waitRun(t, runID); r.Status != clasp.RunSucceeded {
			t.Fatalf("run ended %s (%v); log:\n%s", r.Status, r.Error, s.runLog(t, runID))
		}
		log := s.runLog(t, runID)

		envLines := strings.Split(section(log, "env"), "\n")
		names := map[string]bool{}
		for _, l := range envLines {
			if k, _, ok := strings.Cut(l, "="); ok {
				names[k] = true
			}
		}
		for k, v := range secrets {
			if names[k] || strings.Contains(log, v) {
				t.Errorf("the agent sees the server's %s (%q); log:\n%s", k, v, log)
			}
		}
		allowed := func(k string) bool {
			switch k {
			case "PATH", "HOME", "LANG", "TZ", "TMPDIR", "DATA_DIR", "ADAPTER_VAR", "PWD", "SHLVL", "_", "OLDPWD":
				return true
			}
			return strings.HasPrefix(k, "LC_") || strings.HasPrefix(k, "CLASP_") || strings.HasPrefix(k, "PAPERCLIP_")
		}
		for k := range names {
			if !allowed(k) {
				t.Errorf("the agent's environment holds %s, which is not on the allowlist", k)
			}
		}
		for _, want := range []string{"CLASP_API_KEY", "CLASP_RUN_ID", "PATH", "ADAPTER_VAR"} {
			if !names[want] {
				t.Errorf("the agent's environment lacks %s; env:\n%s", want, section(log, "env"))
			}
		}

		wantDir := filepath.Join(s.DataDir, "runs", runID)
		if got := strings.TrimSpace(section(log, "pwd")); got != wantDir {
			t.Errorf("the agent ran in %q, want its own directory %q", got, wantDir)
		}
		if got := strings.TrimSpace(section(log, "ls")); got != "" {
			t.Errorf("the agent's working directory was not empty at start: %q", got)
		}
		// Without --agent-user the agent has the server's uid: the absolute
		// path stays readable (TestAgentUserCannotReadDataDir closes it).
		if b := section(log, "board rel"); strings.Contains(b, "CLASP_BT_") || !strings.Contains(b, "NO SUCH FILE") {
			t.Errorf("the agent read the board token; log:\n%s", log)
		}
		if strings.Contains(section(log, "db rel"), "SQLite format") {
			t.Errorf("the agent read the database at .clasp/clasp.db; log:\n%s", log)
		}
		if !strings.Contains(log, "wrote-own-dir") {
			t.Errorf("the agent could not write its working directory; log:\n%s", log)
		}
		if _, err := os.Stat(wantDir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the run's working directory %s is still there after the run (stat: %v)", wantDir, err)
		}

		// An adapter cwd is used as is and kept.
		own := t.TempDir()
		ag2 := s.managedAgent(t, "pwd; touch kept", nil)
		if _, err := s.board().AgentSetAdapter(context.Background(), ag2.ID, &clasp.AdapterConfig{Type: clasp.AdapterProcess,
			Command: "/bin/sh", Args: []string{"-c", "pwd; touch kept"}, Cwd: own, Heartbeat: clasp.HeartbeatConfig{Enabled: true}}); err != nil {
			t.Fatal(err)
		}
		run2 := s.wake(t, ag2)
		if r := s.waitRun(t, run2); r.Status != clasp.RunSucceeded {
			t.Fatalf("cwd run ended %s", r.Status)
		}
		if got := strings.TrimSpace(s.runLog(t, run2)); got != own {
			t.Errorf("with cwd %s the agent ran in %q", own, got)
		}
		if _, err := os.Stat(filepath.Join(own, "kept")); err != nil {
			t.Errorf("the adapter's cwd was not kept: %v", err)
		}
	})
}

// agentUserOrSkip returns the account serve --agent-user tests use
// (nobody), or skips the test when the suite does not run as root.
func agentUserOrSkip(t *testing.T) *user.User {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("serve --agent-user needs root (the suite runs as uid %d); CI runs it as root", os.Geteuid())
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody to run agents as: %v", err)
	}
	return u
}

// TestAgentUserCannotReadDataDir: with serve --agent-user, agents run as
// that uid; the data directory (0711), the database and the board token
// (0600) are unreadable to them; they can still write their own working
// directory, and their process group stays killable (cancel ends it).
// On the old code the flag did not exist.
func TestAgentUserCannotReadDataDir(t *testing.T) {
	t.Parallel()
	nobody := agentUserOrSkip(t)
	storeKinds(t, func(t *testing.T, databaseURL string) {
		s := startServer(t, serveOpts{DatabaseURL: databaseURL, Args: []string{"--agent-user", "nobody"}, Traversable: true})
		if strings.Contains(s.output(), "running as root without --agent-uid-range or --agent-user") {
			t.Errorf("the server warned about root although --agent-user is set:\n%s", s.output())
		}
		modes := map[string]os.FileMode{s.DataDir: 0o711, filepath.Join(s.DataDir, "board-token"): 0o600}
		if databaseURL == "" {
			modes[filepath.Join(s.DataDir, "clasp.db")] = 0o600
		}
		for p, want := range modes {
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Mode().Perm(); got != want {
				t.Errorf("%s has mode %o, want %o", p, got, want)
			}
		}
		ag := s.managedAgent(t, dumpScript, map[string]string{"DATA_DIR": s.DataDir})
		runID := s.wake(t, ag)
		if r := s.waitRun(t, runID); r.Status != clasp.RunSucceeded {
			t.Fatalf("run ended %s (%v); log:\n%s", r.Status, r.Error, s.runLog(t, runID))
		}
		log := s.runLog(t, runID)
		if got := strings.TrimSpace(section(log, "id")); got != nobody.Uid {
			t.Errorf("the agent ran as uid %q, want nobody's %s", got, nobody.Uid)
		}
		if ls := section(log, "ls data"); !strings.Contains(ls, "Permission denied") {
			t.Errorf("the agent listed the data directory: %q", ls)
		}
		if b := section(log, "board abs"); strings.Contains(b, "CLASP_BT_") || !strings.Contains(b, "PERMISSION DENIED") {
			t.Errorf("reading %s/board-token gave %q, want permission denied", s.DataDir, b)
		}
		if databaseURL == "" {
			if d := section(log, "db abs"); strings.Contains(d, "SQLite") || !strings.Contains(d, "Permission denied") {
				t.Errorf("reading %s/clasp.db gave %q, want permission denied", s.DataDir, d)
			}
		}
		if !strings.Contains(log, "wrote-own-dir") {
			t.Errorf("the agent could not write its own working directory; log:\n%s", log)
		}

		// The server still stops the agent's process group.
		ag2 := s.managedAgent(t, "echo started; sleep 300 & wait", nil)
		run2 := s.wake(t, ag2)
		// Started: its output is there and the server recorded its pid
		// (which it does just after starting it).
		var r *clasp.Run
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			got, err := s.board().RunGet(context.Background(), run2)
			if err != nil {
				t.Fatal(err)
			}
			if got.PID != nil && strings.Contains(s.runLog(t, run2), "started") {
				r = got
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the long run never started (%+v); server output:\n%s", got, s.output())
			}
		}
		pgid := *r.PID
		if _, err := s.board().RunCancel(context.Background(), run2); err != nil {
			t.Fatal(err)
		}
		if r := s.waitRun(t, run2); r.Status != clasp.RunCancelled {
			t.Errorf("cancelled run ended %s", r.Status)
		}
		if live := groupMembers(pgid); len(live) > 0 {
			t.Errorf("processes %v of the cancelled run's group %d still run", live, pgid)
		}
	})
}

// groupMembers lists the processes of process group pgid that still run:
// not zombies, which are dead and only wait for their parent (here,
// possibly a slow init) to reap them.
func groupMembers(pgid int) []string {
	var live []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		// f[0] is field 3 (state), f[2] field 5 (process group).
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" && f[0] != "X" {
			live = append(live, e.Name())
		}
	}
	return live
}

// TestRootWithoutAgentUserWarns: a server running as root without
// --agent-user says at start that its agents run as root; as another user
// it says nothing of the kind. The old code said nothing either way.
func TestRootWithoutAgentUserWarns(t *testing.T) {
	t.Parallel()
	s := startServer(t, serveOpts{})
	warned := strings.Contains(s.output(), "warning: running as root without --agent-uid-range or --agent-user")
	if root := os.Geteuid() == 0; warned != root {
		t.Errorf("running as root: %v, warned: %v; output:\n%s", root, warned, s.output())
	}
}
