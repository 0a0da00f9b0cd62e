package cli

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/clasp-dev/clasp"
)

// TestVersion: `clasp version` and `clasp --version` print the build's
// version, commit and Go version on one line; --json gives the same fields.
func TestVersion(t *testing.T) {
	t.Parallel()
	b := clasp.Build()
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := runCLI(t, nil, "", args...)
		if r.code != ExitOK || r.stdout != b.String()+"\n" {
			t.Errorf("clasp %v: exit %d, stdout %q, want 0 and %q; stderr %q", args, r.code, r.stdout, b.String()+"\n", r.stderr)
		}
		if !strings.Contains(r.stdout, b.GoVersion) || !strings.Contains(r.stdout, "commit ") {
			t.Errorf("clasp %v: %q does not name the Go version and the commit", args, r.stdout)
		}
	}
	r := runCLI(t, nil, "", "version", "--json")
	var got clasp.BuildInfo
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got != b {
		t.Errorf("clasp version --json: %q (%v), want %+v", r.stdout, err, b)
	}
}

// TestCompletion: `clasp completion SHELL` prints a script for each of the
// four shells; the bash one is valid bash (bash -n) and completes the
// subcommands.
func TestCompletion(t *testing.T) {
	t.Parallel()
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		r := runCLI(t, nil, "", "completion", sh)
		if r.code != ExitOK || !strings.Contains(r.stdout, "clasp") || len(r.stdout) < 500 {
			t.Errorf("clasp completion %s: exit %d, %d bytes; stderr %q", sh, r.code, len(r.stdout), r.stderr)
			continue
		}
		if sh != "bash" {
			continue
		}
		if _, err := exec.LookPath("bash"); err != nil {
			t.Log("no bash here: the script's syntax is not checked")
			continue
		}
		cmd := exec.Command("bash", "-n")
		cmd.Stdin = strings.NewReader(r.stdout)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("bash -n on the bash completion script: %v\n%s", err, out)
		}
	}
	// What the shell scripts call: the completions of "clasp iss".
	r := runCLI(t, nil, "", "__complete", "iss")
	if r.code != ExitOK || !strings.HasPrefix(r.stdout, "issue") {
		t.Errorf("clasp __complete iss: exit %d, stdout %q", r.code, r.stdout)
	}
}

// TestSuggestionsAtEveryLevel walks the command tree: at every group, a
// subcommand name with a typo (two letters swapped) is refused with exit 2
// and "Did you mean this?" naming the subcommand among its suggestions.
func TestSuggestionsAtEveryLevel(t *testing.T) {
	t.Parallel()
	a := &app{getenv: func(string) string { return "" }}
	type probe struct {
		path []string
		want string
	}
	var probes []probe
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		for _, sub := range c.Commands() {
			if sub.Hidden || len(sub.Name()) < 4 {
				continue
			}
			n := []byte(sub.Name())
			n[1], n[2] = n[2], n[1]
			if string(n) != sub.Name() {
				probes = append(probes, probe{append(append([]string(nil), path...), string(n)), sub.Name()})
			}
			walk(sub, append(append([]string(nil), path...), sub.Name()))
		}
	}
	walk(a.newRootCmd(), nil)
	if len(probes) < 10 {
		t.Fatalf("only %d probes: the walk found too few commands", len(probes))
	}
	for _, p := range probes {
		r := runCLI(t, nil, "", p.path...)
		// the suggestions may name another close command first
		// ("uanrchive": archive, unarchive), but must name this one
		sugg, found := "", false
		if _, after, ok := strings.Cut(r.stderr, "Did you mean this?\n"); ok {
			sugg, _, _ = strings.Cut(after, "\n\n")
			found = slices.Contains(strings.Split(sugg, "\n"), "\t"+p.want)
		}
		if r.code != ExitUsage || !found {
			t.Errorf("clasp %s: exit %d, stderr %q; want exit 2 suggesting %q", strings.Join(p.path, " "), r.code, r.stderr, p.want)
		}
	}
}

// TestURLWithoutScheme: a loopback host:port without a scheme is taken as
// http://host:port (the request arrives); another host without a scheme,
// or another scheme, is refused with a sentence before any request.
func TestURLWithoutScheme(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, []*clasp.Company{})
	})
	hostPort := strings.TrimPrefix(f.URL, "http://")
	r := runCLI(t, map[string]string{EnvToken: "clasp_bt_x"}, "", "company", "list", "--url", hostPort)
	if r.code != ExitOK || len(f.requests()) != 1 {
		t.Errorf("--url %s: exit %d, %d requests, stderr %q; want the request sent to http://%s", hostPort, r.code, len(f.requests()), r.stderr, hostPort)
	}
	r = runCLI(t, map[string]string{EnvToken: "clasp_bt_x", EnvURL: hostPort}, "", "company", "list")
	if r.code != ExitOK || len(f.requests()) != 2 {
		t.Errorf("%s=%s: exit %d, stderr %q; want the request sent", EnvURL, hostPort, r.code, r.stderr)
	}
	for _, tc := range []struct{ url, want string }{
		{"clasp.example:3100", `--url "clasp.example:3100" has no scheme: write it as http://clasp.example:3100 (plain HTTP, loopback only) or https://clasp.example:3100`},
		{"ftp://127.0.0.1:21", `--url "ftp://127.0.0.1:21" has the scheme "ftp"`},
		{"http://", `--url "http://" names no host`},
		{"3100", `--url "3100" has no scheme`},
	} {
		r := runCLI(t, map[string]string{EnvToken: "clasp_bt_x"}, "", "company", "list", "--url", tc.url)
		if r.code != ExitUsage || !strings.HasPrefix(r.stderr, "error: "+tc.want) {
			t.Errorf("--url %s: exit %d, stderr %q; want exit 2 and %q", tc.url, r.code, r.stderr, tc.want)
		}
	}
	if n := len(f.requests()); n != 2 {
		t.Errorf("%d requests, want 2: a refused URL sent a request", n)
	}
}

// TestNotAClaspServer: a server that answers HTML (another web server on
// the port) gets "that is not a clasp server", without its page and
// without an error code, for an error status and for a 200 alike.
func TestNotAClaspServer(t *testing.T) {
	t.Parallel()
	page := "<!DOCTYPE html><html><body><h1>Welcome to nginx!</h1></body></html>"
	for _, status := range []int{http.StatusOK, http.StatusNotFound} {
		f := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(page))
		})
		r := runCLI(t, map[string]string{EnvURL: f.URL, EnvToken: "clasp_bt_x"}, "", "issue", "show", "ENG-1")
		if r.code != ExitError || !strings.Contains(r.stderr, "that is not a clasp server") ||
			strings.Contains(r.stderr, "nginx") || strings.Contains(r.stderr, "(internal)") || !strings.HasPrefix(r.stderr, "error: ") {
			t.Errorf("HTML with %d: exit %d, stderr %q; want exit 1 and 'that is not a clasp server', no page, no code", status, r.code, r.stderr)
		}
	}
}

// TestLimitOutOfRange: --limit outside 1-1000 is refused (exit 2) before
// any request; 1000 is sent as is.
func TestLimitOutOfRange(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) { reply(w, 200, []any{}) })
	env := map[string]string{EnvURL: f.URL, EnvToken: "clasp_bt_x"}
	for _, args := range [][]string{
		{"issue", "list", "--company", "c1", "--limit", "5000"},
		{"issue", "list", "--company", "c1", "--limit", "0"},
		{"company", "list", "--limit", "-3"},
		{"activity", "--company", "c1", "--limit", "1001"},
		{"issue", "comments", "ENG-1", "--limit", "5000"},
	} {
		r := runCLI(t, env, "", args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, "is out of range: a page has 1 to 1000 rows") {
			t.Errorf("clasp %v: exit %d, stderr %q; want exit 2, out of range", args, r.code, r.stderr)
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Fatalf("%d requests sent for refused limits", n)
	}
	r := runCLI(t, env, "", "issue", "list", "--company", testCompanyID, "--limit", "1000")
	if reqs := f.requests(); r.code != ExitOK || len(reqs) != 1 || !strings.Contains(reqs[0].Query, "limit=1000") {
		t.Errorf("--limit 1000: exit %d, requests %+v, stderr %q", r.code, reqs, r.stderr)
	}
}

// TestServePortInUse: serve on a busy address names --listen and
// CLASP_LISTEN, and starts nothing.
func TestServePortInUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	r := runCLI(t, nil, "", "serve", "--listen", ln.Addr().String(), "--data-dir", dir)
	want := "error: listen on " + ln.Addr().String() + ": the address is already in use (is another clasp serve running?); choose another with --listen HOST:PORT or CLASP_LISTEN"
	if r.code != ExitError || !strings.HasPrefix(r.stderr, want) {
		t.Errorf("exit %d, stderr %q; want exit 1 and %q", r.code, r.stderr, want)
	}
	err = Serve(context.Background(), ServeConfig{Listen: ln.Addr().String(), DataDir: dir}, nil)
	if err == nil || !strings.Contains(err.Error(), "--listen") {
		t.Errorf("Serve on a busy port: %v, want the error to name --listen", err)
	}
}

// TestErrorPrefixes: every failure the command line reports starts with
// "error: " (lower case), whichever layer refused it: cobra's parsing, a
// command's own check, the server's answer, or the network.
func TestErrorPrefixes(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		reply(w, 404, map[string]any{"error": "Issue ENG-9 does not exist.", "code": "not_found", "details": map[string]any{}})
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	for _, tc := range []struct {
		env  map[string]string
		args []string
	}{
		{nil, []string{"nope"}},
		{nil, []string{"issue", "show"}},
		{nil, []string{"issue", "list", "--limit", "x"}},
		{map[string]string{EnvURL: f.URL}, []string{"issue", "show", "ENG-9"}},
		{map[string]string{EnvURL: closed}, []string{"issue", "show", "ENG-9"}},
		{nil, []string{"company", "list", "--url", "example.com"}},
		{nil, []string{"serve", "--listen", "127.0.0.1:notaport", "--data-dir", t.TempDir()}},
	} {
		r := runCLI(t, tc.env, "", tc.args...)
		if r.code == ExitOK || !strings.HasPrefix(r.stderr, "error: ") {
			t.Errorf("clasp %v: exit %d, stderr %q; want a failure starting with \"error: \"", tc.args, r.code, r.stderr)
		}
	}
}
