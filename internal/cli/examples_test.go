package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// example is one command line of a command's Examples or of the README.
type example struct {
	from string // the command whose help shows it, or README.md
	line string
}

// examplesOf returns the command lines of the Examples of c and of every
// command under it: one per line, a line ending in \ joined to the next.
func examplesOf(c *cobra.Command) []example {
	var out []example
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, l := range joinContinued(strings.Split(c.Example, "\n")) {
			out = append(out, example{from: c.CommandPath(), line: l})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(c)
	return out
}

// trailingComment is a shell comment at the end of an example line.
var trailingComment = regexp.MustCompile(`\s+#\s.*$`)

// joinContinued trims lines and their trailing comments, drops empty and
// comment lines and joins a line ending in a backslash with the next.
func joinContinued(lines []string) []string {
	var out []string
	cur := ""
	for _, l := range lines {
		l = strings.TrimSpace(trailingComment.ReplaceAllString(l, ""))
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if s, ok := strings.CutSuffix(l, `\`); ok {
			cur += s
			continue
		}
		out = append(out, cur+l)
		cur = ""
	}
	return out
}

// readmeExamples returns the lines of README.md's fenced blocks that start
// with "clasp ".
func readmeExamples(t *testing.T) []example {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []example
	in := false
	var block []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "```") {
			if in {
				for _, j := range joinContinued(block) {
					if strings.HasPrefix(j, "clasp ") {
						out = append(out, example{from: "README.md", line: j})
					}
				}
			}
			in, block = !in, nil
			continue
		}
		if in {
			block = append(block, l)
		}
	}
	return out
}

// skipped are the example lines the test does not run, each with why.
var skipped = map[string]string{
	"sudo clasp serve --agent-uid-range 200000-265535 --data-dir /var/lib/clasp":                                                   "runs agents as uids of their own: needs root (the isolation tests cover it)",
	"clasp migrate --database-url postgres://clasp@db.internal/clasp":                                                              "needs a PostgreSQL server at db.internal",
	"clasp bench --database-url postgres://clasp@127.0.0.1/clasp --clients 32":                                                     "needs a PostgreSQL server",
	"clasp swarm --database-url postgres://clasp@127.0.0.1/clasp --replicas 3 --agents 16 --kill-rate 0.2 --kill-replica-every 5s": "needs a PostgreSQL server",
	"clasp verify --database-url postgres://clasp@127.0.0.1/clasp?sslmode=disable --replicas 3 --duration 30s":                     "needs a PostgreSQL server",
	`clasp swarm --git --agents 8 --kill-rate 0.2 --lease-ttl 2s --database-url "$CLASP_DATABASE_URL" --replicas 3`:                "needs a PostgreSQL server",
	"claude mcp add clasp --env CLASP_URL=http://127.0.0.1:3100 --env CLASP_API_KEY=clasp_ak_... -- clasp mcp":                     "registers clasp with another program (claude); `clasp mcp` itself runs above",
	"clasp agent terminate <agent-id>": "asks for confirmation on a terminal, which the test has none of; the --yes form runs",
}

// rewritten are example lines run in another form, with why: the part
// that is not clasp's is replaced by something the test can run.
var rewritten = map[string]struct{ line, why string }{
	"go test ./... 2>&1 | clasp issue comment ACME-12 -":           {"printf 'ok  github.com/clasp-dev/clasp 1.2s\\n' | clasp issue comment ACME-12 -", "the repository's whole test suite would run inside this test; its output is stood in for"},
	"clasp completion powershell | Out-String | Invoke-Expression": {"clasp completion powershell", "the rest is PowerShell"},
	`clasp completion zsh > "${fpath[1]}/_clasp"`:                  {`clasp completion zsh > "$EXAMPLE_TMP/_clasp"`, "${fpath[1]} is zsh's, not sh's"},
}

// longRunning says which lines run until stopped (or for longer than a
// test may wait): they pass when, within longWindow, they print something
// and have not failed.
func longRunning(line string) bool {
	for _, p := range []string{"clasp serve", "clasp swarm", "clasp bench", "clasp verify", "clasp mcp", "--follow"} {
		if strings.Contains(line, p) {
			return true
		}
	}
	return strings.Contains(line, "clasp events") && !strings.Contains(line, "--count")
}

const (
	longWindow   = 4 * time.Second
	exampleLimit = 20 * time.Second
	outputLimit  = 1 << 20
)

// exampleServer is a `clasp serve` of one example, on loopback, with its
// data in dir/.clasp, and the things its examples name.
type exampleServer struct {
	t                                 *testing.T
	bin, dir, data, url, token        string
	company, agent, key, keyID        string
	run, runToken, issue, operatorTok string
	cmd                               *exec.Cmd
	done                              chan struct{}
	stderr                            bytes.Buffer
}

// startExampleServer starts clasp serve with a fresh data directory and
// creates company EX (Examples), agent builder with a key, a run of it and
// a todo issue.
func startExampleServer(t *testing.T, bin string) *exampleServer {
	t.Helper()
	s := &exampleServer{t: t, bin: bin, dir: t.TempDir(), done: make(chan struct{})}
	s.data = filepath.Join(s.dir, ".clasp")
	s.cmd = exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", s.data)
	s.cmd.Env = exampleEnv()
	s.cmd.Stderr = &s.stderr
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "clasp listening on "); ok {
				got <- u
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		close(got)
		_ = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(s.stop)
	u, ok := <-got
	if !ok {
		t.Fatalf("clasp serve exited before listening: %s", s.stderr.String())
	}
	s.url = u
	s.readToken()
	var co, ag, key, run, iss, op struct {
		ID         string `json:"id"`
		Token      string `json:"token"`
		RunToken   string `json:"runToken"`
		Identifier string `json:"identifier"`
	}
	s.api("POST", "/api/companies", s.token, `{"name":"Examples","issuePrefix":"EX"}`, &co)
	s.api("POST", "/api/companies/"+co.ID+"/agents", s.token, `{"name":"builder"}`, &ag)
	s.api("POST", "/api/agents/"+ag.ID+"/keys", s.token, `{}`, &key)
	s.api("POST", "/api/agents/me/runs", key.Token, `{}`, &run)
	s.api("POST", "/api/companies/"+co.ID+"/issues", s.token, `{"title":"An example's issue","status":"todo"}`, &iss)
	// EX-2 to EX-5 stand for the other issues the examples name (a
	// parent, blockers, an issue to show), in backlog: no agent example
	// claims them.
	for i := 2; i <= 5; i++ {
		s.api("POST", "/api/companies/"+co.ID+"/issues", s.token, fmt.Sprintf(`{"title":"Example issue %d","status":"backlog"}`, i), nil)
	}
	s.api("POST", "/api/operators/tokens", s.token, `{"name":"ci","role":"viewer"}`, &op)
	s.company, s.agent, s.key, s.keyID, s.run, s.runToken, s.issue, s.operatorTok = co.ID, ag.ID, key.Token, key.ID, run.ID, run.RunToken, iss.Identifier, op.ID
	return s
}

// readToken reads the board token from the data directory (an example may
// have rotated it).
func (s *exampleServer) readToken() {
	b, err := os.ReadFile(filepath.Join(s.data, "board-token"))
	if err != nil {
		s.t.Fatal(err)
	}
	s.token = strings.TrimSpace(string(b))
}

// stop ends the server (SIGTERM, then SIGKILL after 20 s) and waits for it.
func (s *exampleServer) stop() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// api sends one request as bearer and decodes the 2xx answer into out.
func (s *exampleServer) api(method, path, bearer, body string, out any) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Header.Set("Content-Type", "application/json")
	res, err := exampleClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode/100 != 2 {
		s.t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			s.t.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

// post sends a POST as bearer from a goroutine other than the test's and
// reports whether it was answered 2xx (decoding the answer into out).
func (s *exampleServer) post(path, bearer, body string, out any) bool {
	req, err := http.NewRequest("POST", s.url+path, strings.NewReader(body))
	if err != nil {
		return false
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Header.Set("Content-Type", "application/json")
	res, err := exampleClient.Do(req)
	if err != nil {
		return false
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode/100 == 2 && (out == nil || json.Unmarshal(b, out) == nil)
}

// exampleEnv is the process environment without any CLASP_ variable.
func exampleEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CLASP_") {
			env = append(env, kv)
		}
	}
	return env
}

// agentSide says whether a line acts as the agent (its API key is the
// token) rather than as the board.
func agentSide(line string) bool {
	for _, p := range []string{"run open", "run heartbeat", "run finish", "issue checkout", "issue claim", "agent work", "agent inbox", "agent me", "clasp mcp"} {
		if strings.Contains(line, p) {
			return true
		}
	}
	return false
}

// exampleClient keeps no idle connection (none outlives the test).
var exampleClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// testName keeps what a subtest's name (and its temporary directory's)
// may hold without a shell reading it.
var testName = regexp.MustCompile(`[^A-Za-z0-9.,=-]+`)

// stoppedError is the CLI's report of a failure on stderr.
var stoppedError = regexp.MustCompile(`(?m)^error:`)

var anyID = regexp.MustCompile(`<[a-z-]+>`)

// TestEveryExampleRuns runs every example of every command's help and every
// `clasp ...` line of README.md's blocks, each through /bin/sh in the
// directory of a fresh `clasp serve` (data in ./.clasp), with the names it
// uses (ACME-12, <agent-id>, clasp_ak_..., the server's URL) replaced by
// real ones. An example fails when it exits non-zero, or, for one that runs
// until stopped, when it prints nothing or fails within its window.
func TestEveryExampleRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a server per example; skipped with -short")
	}
	start := time.Now()
	bin := filepath.Join(t.TempDir(), "clasp")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/clasp").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	a := &app{getenv: func(string) string { return "" }}
	all := append(examplesOf(a.newRootCmd()), readmeExamples(t)...)
	if len(all) < 50 {
		t.Fatalf("found %d examples; the walk of the command tree is broken", len(all))
	}
	seen := map[string]bool{}
	for _, ex := range all {
		if seen[ex.line] {
			continue
		}
		seen[ex.line] = true
		if why, ok := skipped[ex.line]; ok && rewritten[ex.line].line == "" {
			t.Logf("SKIP %s (%s): %s", ex.line, ex.from, why)
			continue
		}
		t.Run(testName.ReplaceAllString(ex.line, "_"), func(t *testing.T) { runExample(t, bin, repo, ex) })
	}
	if d := time.Since(start); d > 3*time.Minute {
		t.Errorf("the examples took %s, more than 3 minutes", d.Round(time.Second))
	}
}

func runExample(t *testing.T, bin, repo string, ex example) {
	line := ex.line
	if r, ok := rewritten[line]; ok {
		t.Logf("run as %q: %s", r.line, r.why)
		line = r.line
	}
	s := startExampleServer(t, bin)
	tmp := t.TempDir()
	backups := filepath.Join(tmp, "backups")
	if err := os.MkdirAll(backups, 0o755); err != nil {
		t.Fatal(err)
	}
	runID, runToken := s.run, s.runToken
	if strings.Contains(line, "run log") || strings.Contains(line, "agent wake") {
		// A run whose process the server starts (it has a log), and an
		// agent that can be woken.
		s.api("PATCH", "/api/agents/"+s.agent, s.token, `{"adapter":{"type":"process","command":"/bin/sh","args":["-c","echo hello from the run"]}}`, nil)
		if strings.Contains(line, "run log") {
			// The agent's open run ends first: a wake while it runs
			// would wait for it.
			s.api("POST", "/api/runs/"+s.run+"/finish", s.key, `{"status":"succeeded"}`, nil)
			var w struct {
				RunID string `json:"runId"`
			}
			s.api("POST", "/api/agents/"+s.agent+"/wakeup", s.token, `{}`, &w)
			runID = w.RunID
		}
	}
	if strings.Contains(line, "agent work") {
		// The agent loop hashes the file an issue's description names.
		s.api("PATCH", "/api/issues/"+s.issue, s.token, `{"description":"`+filepath.Join(repo, "README.md")+`"}`, nil)
	}
	if strings.Contains(line, "clasp swarm") {
		// The swarm files an issue per file of its directory.
		for i := range 3 {
			if err := os.WriteFile(filepath.Join(s.dir, fmt.Sprintf("file-%d.txt", i)), []byte(fmt.Sprintf("file %d\n", i)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if strings.Contains(line, "clasp restore") {
		for _, name := range []string{"clasp-2026-12-01.db", "clasp.db"} {
			if out, err := exec.Command(bin, "backup", "--data-dir", s.data, "--to", filepath.Join(backups, name)).CombinedOutput(); err != nil {
				t.Fatalf("backup for the restore: %v\n%s", err, out)
			}
		}
	}
	if strings.Contains(line, "clasp restore") || strings.Contains(line, "clasp migrate") || strings.Contains(line, "clasp serve") {
		s.stop() // they need the data directory to themselves
	}
	if strings.Contains(line, "<gate-token-id>") {
		var g struct {
			ID string `json:"id"`
		}
		s.api("POST", "/api/companies/"+s.company+"/gate-tokens", s.token, `{"name":"to revoke"}`, &g)
		line = strings.ReplaceAll(line, "<gate-token-id>", g.ID)
	}
	if strings.Contains(line, "<webhook-id>") || strings.Contains(line, "<delivery-id>") {
		// A subscription of the company, and a delivery of it (an issue
		// created after it).
		var h, is struct {
			ID string `json:"id"`
		}
		s.api("POST", "/api/companies/"+s.company+"/webhooks", s.token, `{"url":"https://hooks.example.com/clasp","events":["issue.*"]}`, &h)
		s.api("POST", "/api/companies/"+s.company+"/issues", s.token, `{"title":"for the webhook"}`, &is)
		var ds []struct {
			ID string `json:"id"`
		}
		s.api("GET", "/api/webhooks/"+h.ID+"/deliveries", s.token, "", &ds)
		line = strings.ReplaceAll(line, "<webhook-id>", h.ID)
		if len(ds) > 0 {
			line = strings.ReplaceAll(line, "<delivery-id>", ds[0].ID)
		}
	}
	appRepo := filepath.Join(tmp, "app.git")
	if strings.Contains(line, "/srv/git/app.git") {
		// The gate is installed in a bare repository of its own.
		if out, err := exec.Command("git", "init", "-q", "--bare", appRepo).CombinedOutput(); err != nil {
			t.Fatalf("git init: %v\n%s", err, out)
		}
	}
	r := strings.NewReplacer(
		"/srv/git/app.git", appRepo,
		"http://127.0.0.1:3100", s.url,
		"clasp_ak_...", s.key, "clasp_rt_...", runToken, "clasp_bt_...", s.token,
		"<company-id>", s.company, "<id>", s.company, "0b6c...e1", s.company,
		"<agent-id>", s.agent, "<key-id>", s.keyID, "<run-id>", runID, "<token-id>", s.operatorTok,
		"ACME-12", s.issue, "ENG-12", s.issue, "--company ACME", "--company EX",
		"company show ACME", "company show EX", "company update ACME", "company update EX", "archive ACME", "archive EX",
		"ACME-1", "EX-2", "ACME-3", "EX-3", "ACME-4", "EX-4", "ACME-5", "EX-5",
		"/backups/", backups+"/", "/var/lib/clasp", s.data, "/tmp/clasp", filepath.Join(tmp, "serve-data"),
		"/tmp/verify", filepath.Join(tmp, "verify"), "/src/clasp", repo, "/usr/share/doc", filepath.Join(repo, "docs"),
		"/etc/bash_completion.d/clasp", filepath.Join(tmp, "clasp.bash"), "~/.config/fish/completions/clasp.fish", filepath.Join(tmp, "clasp.fish"),
		"git log", "git -C "+repo+" log",
	)
	line = r.Replace(line)
	if m := anyID.FindString(line); m != "" {
		t.Fatalf("the example names %s, which the test has no value for: add it to the replacements", m)
	}
	token := s.token
	if agentSide(line) {
		token = s.key
	}
	if strings.Contains(line, "clasp gate check") {
		// The gate's check takes a gate token (and only it may call it).
		var g struct {
			Token string `json:"token"`
		}
		s.api("POST", "/api/companies/"+s.company+"/gate-tokens", s.token, `{"name":"examples"}`, &g)
		token = g.Token
	}
	ctx, cancel := context.WithTimeout(context.Background(), exampleLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", line)
	cmd.Dir = s.dir
	cmd.Env = append(exampleEnv(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"), "CLASP_URL="+s.url, "CLASP_TOKEN="+token,
		"CLASP_LISTEN=127.0.0.1:0", "EXAMPLE_TMP="+tmp, "HOME="+tmp)
	if strings.Contains(line, "clasp mcp") {
		cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"examples","version":"1"}}}` + "\n")
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out, errb limitedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	long := longRunning(line)
	var waitErr error
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	if strings.Contains(line, "clasp events") {
		// The event stream shows what happens while it runs: an issue is
		// created every 200 ms until the command has ended.
		stim, stimDone := make(chan struct{}), make(chan struct{})
		defer func() { close(stim); <-stimDone }()
		go func() {
			defer close(stimDone)
			tick := time.NewTicker(200 * time.Millisecond)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-stim:
					return
				case <-tick.C:
					var iss struct {
						ID string `json:"id"`
					}
					if s.post("/api/companies/"+s.company+"/issues", s.token, fmt.Sprintf(`{"title":"event %d","status":"todo"}`, i), &iss) {
						s.post("/api/issues/"+iss.ID+"/checkout", runToken, `{"agentId":"`+s.agent+`","expectedStatuses":["todo"]}`, nil)
					}
				}
			}
		}()
	}
	stopped := false
	if long {
		select {
		case waitErr = <-waited:
		case <-time.After(longWindow):
			stopped = true
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			select {
			case waitErr = <-waited:
			case <-time.After(10 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				waitErr = <-waited
			}
		}
	} else {
		waitErr = <-waited
	}
	report := fmt.Sprintf("%s\n(from %s)\nstdout:\n%s\nstderr:\n%s", line, ex.from, out.String(), errb.String())
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		t.Fatalf("ran for more than %s: %s", exampleLimit, report)
	case stopped:
		if out.Len()+errb.Len() == 0 {
			t.Fatalf("printed nothing in %s: %s", longWindow, report)
		}
		if stoppedError.MatchString(errb.String()) {
			t.Fatalf("reported an error before or when it was stopped: %s", report)
		}
	case waitErr != nil:
		t.Fatalf("failed (%v): %s", waitErr, report)
	case long && out.Len()+errb.Len() == 0:
		t.Fatalf("printed nothing: %s", report)
	}
}

// limitedBuffer keeps the first outputLimit bytes written to it.
type limitedBuffer struct{ bytes.Buffer }

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := outputLimit - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
