package securitytest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// runClasp runs the clasp binary with args, env (plus PATH) and stdin, and
// returns its exit code, stdout and stderr.
func runClasp(t *testing.T, env []string, stdin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(claspBin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// TestCLITokenOutOfArgv: the CLI takes its token from CLASP_TOKEN,
// --token-file FILE, --token-file - or --token - (stdin) without a word on
// stderr; a --token value still works but warns that argv is readable by
// every local user; --token and --token-file together are a usage error.
// On the old code --token-file and --token - did not exist and --token
// was silent.
func TestCLITokenOutOfArgv(t *testing.T) {
	t.Parallel()
	s := startServer(t, serveOpts{})
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(s.BoardToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url := "CLASP_URL=" + s.URL
	for _, c := range []struct {
		name  string
		env   []string
		stdin string
		args  []string
		code  int
		warn  bool
	}{
		{"env", []string{url, "CLASP_TOKEN=" + s.BoardToken}, "", nil, 0, false},
		{"token-file", []string{url}, "", []string{"--token-file", file}, 0, false},
		{"token-file-stdin", []string{url}, s.BoardToken + "\n", []string{"--token-file", "-"}, 0, false},
		{"token-stdin", []string{url}, s.BoardToken + "\n", []string{"--token", "-"}, 0, false},
		{"token-arg", []string{url}, "", []string{"--token", s.BoardToken}, 0, true},
		{"both", []string{url}, "", []string{"--token", s.BoardToken, "--token-file", file}, 2, false},
		{"empty-stdin", []string{url}, "", []string{"--token", "-"}, 2, false},
	} {
		code, out, errOut := runClasp(t, c.env, c.stdin, append([]string{"company", "list", "--json"}, c.args...)...)
		if code != c.code {
			t.Errorf("%s: exit %d, want %d; stdout %q, stderr %q", c.name, code, c.code, out, errOut)
		}
		if warned := strings.Contains(errOut, "warning: --token puts the secret on this process's command line"); warned != c.warn {
			t.Errorf("%s: warned %v, want %v; stderr %q", c.name, warned, c.warn, errOut)
		}
	}
}

// TestMCPKeyArgWarns: clasp mcp --key VALUE warns on stderr that argv is
// readable by every local user; the key from $CLASP_API_KEY does not. Both
// exit 0 at the end of stdin (no tool call, no network call).
func TestMCPKeyArgWarns(t *testing.T) {
	t.Parallel()
	const warning = "warning: --key puts the secret on this process's command line"
	for _, c := range []struct {
		name string
		env  []string
		args []string
		warn bool
	}{
		{"env", []string{"CLASP_URL=http://127.0.0.1:1", "CLASP_API_KEY=clasp_ak_x"}, nil, false},
		{"key-arg", []string{"CLASP_URL=http://127.0.0.1:1"}, []string{"--key", "clasp_ak_x"}, true},
	} {
		code, _, errOut := runClasp(t, c.env, "", append([]string{"mcp"}, c.args...)...)
		if code != 0 {
			t.Errorf("%s: exit %d; stderr %q", c.name, code, errOut)
		}
		if warned := strings.Contains(errOut, warning); warned != c.warn {
			t.Errorf("%s: warned %v, want %v; stderr %q", c.name, warned, c.warn, errOut)
		}
	}
}

// TestBenchJSONRecordsNoSecret: clasp bench --json records its command
// line with the --token value redacted. On the old code the command field
// held the board token.
func TestBenchJSONRecordsNoSecret(t *testing.T) {
	t.Parallel()
	s := startServer(t, serveOpts{})
	code, out, errOut := runClasp(t, nil, "", "bench", "--server", s.URL, "--token", s.BoardToken, "--workload", "cycle",
		"--duration", "200ms", "--issues", "40", "--json")
	if code != 0 {
		t.Fatalf("bench: exit %d, stderr %s", code, errOut)
	}
	var rep struct {
		Command string `json:"command"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("bench --json output: %v\n%s", err, out)
	}
	if strings.Contains(out, s.BoardToken) || !strings.Contains(rep.Command, "--token [redacted]") {
		t.Errorf("bench --json command %q: want the token redacted and nowhere in the report", rep.Command)
	}
}

// TestPprofAnswersLoopbackHostOnly: serve --pprof answers only requests
// whose Host is a loopback name and that carry an admin operator token (the
// board token); a rebound DNS name (any other Host) gets 403 and a request
// without the token 401, also on /debug/pprof/cmdline (the server's argv).
func TestPprofAnswersLoopbackHostOnly(t *testing.T) {
	t.Parallel()
	s := startServer(t, serveOpts{Args: []string{"--pprof", "127.0.0.1:0"}, Pprof: true})
	_, port, _ := strings.Cut(s.PprofAddr, ":")
	for host, want := range map[string]int{
		"127.0.0.1:" + port: 200, "localhost:" + port: 200, "[::1]:" + port: 200, "localhost": 200,
		"attacker.example:" + port: 403, "attacker.example": 403, "127.0.0.1.nip.io:" + port: 403,
	} {
		req, _ := http.NewRequest("GET", "http://"+s.PprofAddr+"/debug/pprof/cmdline", nil)
		req.Host = host
		req.Header.Set("Authorization", "Bearer "+s.BoardToken)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("Host %q: %d, want %d", host, res.StatusCode, want)
		}
		if want == 403 && strings.Contains(string(body), "serve") {
			t.Errorf("Host %q got the server's argv: %q", host, body)
		}
	}
	// A loopback Host without the admin token gets 401, not the argv.
	res, err := http.Get("http://" + s.PprofAddr + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized || strings.Contains(string(body), "serve") {
		t.Errorf("pprof cmdline without a token: %d %q, want 401 without the argv", res.StatusCode, body)
	}
}

// TestShellExampleKeepsKeyOutOfArgv runs examples/shell-agent/agent.sh
// as a managed agent with a curl on PATH that records its arguments
// before running the real one: the run succeeds and no clasp credential
// is among curl's arguments. On the old code the key was curl's -H
// argument.
func TestShellExampleKeepsKeyOutOfArgv(t *testing.T) {
	t.Parallel()
	realCurl, err := exec.LookPath("curl")
	if err != nil {
		t.Skipf("the shell example needs curl: %v", err)
	}
	if _, err := exec.LookPath("jq"); err != nil {
		t.Skipf("the shell example needs jq: %v", err)
	}
	script, err := filepath.Abs("../../examples/shell-agent/agent.sh")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	argv := filepath.Join(bin, "curl-argv")
	wrapper := "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\" >> " + argv + "; done\nexec " + realCurl + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "curl"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, serveOpts{})
	ctx := context.Background()
	b := s.board()
	co, err := b.CompanyCreate(ctx, client.CompanyCreateRequest{Name: "Example", IssuePrefix: prefix()})
	if err != nil {
		t.Fatal(err)
	}
	ag, err := b.AgentCreate(ctx, co.ID, client.AgentCreateRequest{Name: "shell"})
	if err != nil {
		t.Fatal(err)
	}
	iss, err := b.IssueCreate(ctx, co.ID, client.IssueCreateRequest{Title: "argv", Status: clasp.IssueTodo, AssigneeAgentID: ag.ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.AgentSetAdapter(ctx, ag.ID, &clasp.AdapterConfig{Type: clasp.AdapterProcess, Command: "/bin/sh", Args: []string{script},
		Env: map[string]string{"PATH": bin + ":" + os.Getenv("PATH")}, TimeoutSec: 60, Heartbeat: clasp.HeartbeatConfig{Enabled: true}}); err != nil {
		t.Fatal(err)
	}
	w, err := b.AgentWake(ctx, ag.ID, client.WakeRequest{IssueID: iss.ID})
	if err != nil || w.RunID == nil {
		t.Fatalf("wake: %+v, %v", w, err)
	}
	if r := s.waitRun(t, *w.RunID); r.Status != clasp.RunSucceeded {
		t.Fatalf("the example's run ended %s; log:\n%s", r.Status, s.runLog(t, *w.RunID))
	}
	got, err := os.ReadFile(argv)
	if err != nil {
		t.Fatalf("curl was not called through the wrapper: %v", err)
	}
	if len(got) == 0 || strings.Contains(string(got), "clasp_") || strings.Contains(string(got), "Authorization") {
		t.Errorf("curl's arguments hold the key:\n%s", got)
	}
}
