package sdktest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
	"github.com/clasp-dev/clasp/internal/serveproc"
)

// repoRoot is the repository's root, from this package's directory.
var repoRoot = func() string {
	abs, err := filepath.Abs("../..")
	if err != nil {
		panic(err)
	}
	return abs
}()

// lang is one client under test: how to start its scenario script.
type lang struct {
	name string
	argv func(scenario string) []string
	// only, when not nil, lists the scenarios the client has the
	// behaviour for; the others are skipped, saying why.
	only map[string]bool
	why  string
	// missing says why the client cannot run here ("" when it can).
	missing string
}

// goClient is the Go client (package client), through goscenarios.
var goClient = lang{
	name: "go",
	argv: func(s string) []string { return []string{goScenarios, s} },
	only: map[string]bool{"checkout": true, "idempotent": true, "lost_answer": true, "conflict": true, "claim_until_empty": true, "events": true},
	why:  "the Go client has no run scope, work loop or waiting out of 429s (clasp agent work is its loop, tested by the swarm)",
}

// languages returns the Python and TypeScript clients. One whose
// interpreter (python3, or node and npm) is missing here says so in
// missing: its tests skip with that message, except in CI (CI set), where
// they fail (lang.ready).
func languages(t *testing.T) []lang {
	t.Helper()
	ts := lang{name: "typescript"}
	if dir := typescriptBuild(t); dir == "" {
		ts.missing = tsErr
	} else {
		node, _ := exec.LookPath("node")
		script := filepath.Join(dir, "test/scenarios.mjs")
		ts.argv = func(s string) []string { return []string{node, script, s} }
	}
	return []lang{pythonLang(), ts}
}

// pythonLang is the Python client (missing set when python3 is not here).
func pythonLang() lang {
	py := lang{name: "python"}
	if bin, err := exec.LookPath("python3"); err != nil {
		py.missing = "python3 is not on PATH: the Python client's scenarios cannot run"
	} else {
		script := filepath.Join(repoRoot, "sdk/python/tests/scenarios.py")
		py.argv = func(s string) []string { return []string{bin, script, s} }
	}
	return py
}

// ready skips (or in CI fails) the test when l cannot run here.
func (l lang) ready(t *testing.T) {
	t.Helper()
	if l.missing == "" {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s (CI is set: it must not be skipped)", l.missing)
	}
	t.Skip(l.missing)
}

var (
	tsOnce sync.Once
	tsDir  string
	tsErr  string
)

// typescriptBuild builds the TypeScript package once per test binary in a
// temporary copy of sdk/typescript (npm ci from its lockfile, then npm run
// build, which first fails when src/generated/openapi.ts differs from
// what internal/httpapi/openapi.json generates), beside a copy of
// examples/typescript-agent, and returns the package copy's directory; ""
// when node or npm is missing (reported by missing). The repository's own
// tree is left as it is.
func typescriptBuild(t *testing.T) string {
	t.Helper()
	tsOnce.Do(func() {
		node, nerr := exec.LookPath("node")
		npm, perr := exec.LookPath("npm")
		if nerr != nil || perr != nil {
			tsErr = "node or npm is not on PATH: the TypeScript client's scenarios cannot run"
			return
		}
		_ = node
		root, err := os.MkdirTemp(tmpRoot, "ts-")
		if err != nil {
			tsErr = err.Error()
			return
		}
		// The copy keeps the repository's layout, so that the example
		// agent's import of ../../sdk/typescript/dist finds the build.
		dir := filepath.Join(root, "sdk/typescript")
		ex := filepath.Join(root, "examples/typescript-agent")
		for _, d := range []string{dir, ex} {
			if err := os.MkdirAll(d, 0o750); err != nil {
				tsErr = err.Error()
				return
			}
		}
		if out, err := exec.Command("cp", filepath.Join(repoRoot, "examples/typescript-agent/agent.mjs"), ex).CombinedOutput(); err != nil {
			tsErr = fmt.Sprintf("copy the example agent: %v\n%s", err, out)
			return
		}
		src := filepath.Join(repoRoot, "sdk/typescript")
		for _, f := range []string{"package.json", "package-lock.json", "tsconfig.json", "scripts", "src", "test"} {
			if out, err := exec.Command("cp", "-R", filepath.Join(src, f), dir).CombinedOutput(); err != nil {
				tsErr = fmt.Sprintf("copy %s: %v\n%s", f, err, out)
				return
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		for _, args := range [][]string{{"ci", "--no-audit", "--no-fund", "--loglevel=error"}, {"run", "build"}} {
			cmd := exec.CommandContext(ctx, npm, args...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "CLASP_OPENAPI="+filepath.Join(repoRoot, "internal/httpapi/openapi.json"))
			if out, err := cmd.CombinedOutput(); err != nil {
				tsErr = fmt.Sprintf("npm %s in a copy of sdk/typescript: %v\n%s", strings.Join(args, " "), err, out)
				return
			}
		}
		tsDir = dir
	})
	switch {
	case tsDir != "":
		return tsDir
	case strings.HasPrefix(tsErr, "node or npm"):
		return ""
	default:
		t.Fatalf("build the TypeScript client: %s", tsErr)
	}
	return ""
}

// server is a `clasp serve` process and a board client of it.
type server struct {
	srv   *serveproc.Server
	board *client.Client
	url   string
}

// startServer starts `clasp serve` with args on a fresh store of backend
// ("sqlite", or "postgres": a fresh database on CLASP_TEST_POSTGRES_URL).
func startServer(t *testing.T, backend string, args ...string) *server {
	t.Helper()
	args = append([]string{"--data-dir", filepath.Join(t.TempDir(), "data")}, args...)
	if backend == "postgres" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		u, drop, err := serveproc.CreateDatabase(ctx, os.Getenv(serveproc.EnvTestPostgresURL), "sdktest")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := drop(context.Background()); err != nil {
				t.Errorf("drop database: %v", err)
			}
		})
		args = append(args, "--database-url", u)
	}
	logs := &syncBuffer{}
	srv, err := serveproc.StartServer(t.Context(), serveproc.ServerConfig{Binary: claspBin, Args: args, Log: logs})
	if err != nil {
		t.Fatalf("start clasp serve: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			t.Errorf("stop server: %v", err)
		}
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	return &server{srv: srv, url: srv.URL(), board: client.New(srv.URL(), client.WithToken(srv.BoardToken()))}
}

// backends are the stores to run on: SQLite always, PostgreSQL when
// CLASP_TEST_POSTGRES_URL is set (in CI it must be).
func backends(t *testing.T) []string {
	t.Helper()
	if os.Getenv(serveproc.EnvTestPostgresURL) != "" {
		return []string{"sqlite", "postgres"}
	}
	if os.Getenv("CI") != "" {
		t.Errorf("%s is not set, and CI is: the PostgreSQL scenarios must not be skipped in CI", serveproc.EnvTestPostgresURL)
	} else {
		t.Logf("%s is not set: the scenarios run on SQLite only", serveproc.EnvTestPostgresURL)
	}
	return []string{"sqlite"}
}

// fixture is a fresh company with one agent, its key and todo issues.
type fixture struct {
	co     *clasp.Company
	agent  *clasp.Agent
	key    string
	issues []*clasp.Issue
}

func newFixture(t *testing.T, s *server, issues int) *fixture {
	t.Helper()
	ctx := t.Context()
	prefix := "SDK" + strings.ToUpper(randomLetters(5))
	f := &fixture{}
	var err error
	// Each call waits out a 429 (the rate-limit scenario's server limits
	// the board's credential too).
	patient(t, func() error {
		f.co, err = s.board.CompanyCreate(ctx, client.CompanyCreateRequest{Name: "sdk " + prefix, IssuePrefix: prefix})
		return err
	})
	patient(t, func() error {
		f.agent, err = s.board.AgentCreate(ctx, f.co.ID, client.AgentCreateRequest{Name: "sdk-agent"})
		return err
	})
	patient(t, func() error {
		k, err := s.board.AgentKeyCreate(ctx, f.agent.ID)
		if err == nil {
			f.key = k.Token
		}
		return err
	})
	for i := range issues {
		patient(t, func() error {
			iss, err := s.board.IssueCreate(ctx, f.co.ID, client.IssueCreateRequest{Title: fmt.Sprintf("issue %d", i+1), Status: clasp.IssueTodo})
			if err == nil {
				f.issues = append(f.issues, iss)
			}
			return err
		})
	}
	return f
}

// patient calls f until it answers anything but 429 rate_limited, waiting
// as each answer's retryAfterSeconds says; any other error ends the test.
func patient(t *testing.T, f func() error) {
	t.Helper()
	for {
		err := f()
		if err == nil {
			return
		}
		e := clasp.AsError(err)
		if e == nil || e.Code != clasp.CodeRateLimited {
			t.Fatal(err)
		}
		secs, _ := e.Details["retryAfterSeconds"].(float64)
		time.Sleep(time.Duration(max(secs, 1) * float64(time.Second)))
	}
}

func randomLetters(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = 'a' + b[i]%26
	}
	return string(b)
}

func nonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// proc is a running scenario script: its JSON lines arrive on lines.
type proc struct {
	cmd    *exec.Cmd
	lines  chan map[string]any
	stderr *syncBuffer
	done   chan error
}

// startScript starts the scenario script of l with the server's URL, the
// agent's key and env; it is killed at the end of the test.
func startScript(t *testing.T, l lang, scenario string, s *server, f *fixture, env ...string) *proc {
	t.Helper()
	argv := l.argv(scenario)
	cmd := exec.Command(argv[0], argv[1:]...) // #nosec G204 -- the scenario script under test
	cmd.Dir = repoRoot
	cmd.Env = append(cleanEnv(), "CLASP_URL="+s.url, "CLASP_API_KEY="+f.key)
	cmd.Env = append(cmd.Env, env...)
	p := &proc{cmd: cmd, lines: make(chan map[string]any, 100), stderr: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stderr = p.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", strings.Join(argv, " "), err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				fmt.Fprintf(p.stderr, "[not a JSON line] %s\n", sc.Text())
				continue
			}
			p.lines <- m
		}
		_, _ = io.Copy(io.Discard, stdout)
		close(p.lines)
		p.done <- cmd.Wait()
		close(p.done)
	}()
	return p
}

// cleanEnv is the test's environment without the clasp and Paperclip
// variables, so that only what a scenario passes reaches the client.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "CLASP_") || strings.HasPrefix(kv, "PAPERCLIP_") || strings.HasPrefix(kv, "SCN_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// scriptTimeout bounds one scenario script (a guard against a hung
// process, not a timing check).
const scriptTimeout = 2 * time.Minute

// wait waits for the script to exit 0 and returns every JSON line it
// printed.
func (p *proc) wait(t *testing.T) []map[string]any {
	t.Helper()
	var got []map[string]any
	timer := time.NewTimer(scriptTimeout)
	defer timer.Stop()
	for {
		select {
		case m, ok := <-p.lines:
			if !ok {
				if err := <-p.done; err != nil {
					t.Fatalf("%s exited with %v; stderr:\n%s", strings.Join(p.cmd.Args, " "), err, p.stderr.String())
				}
				return got
			}
			got = append(got, m)
		case <-timer.C:
			t.Fatalf("%s still runs after %s; stderr:\n%s", strings.Join(p.cmd.Args, " "), scriptTimeout, p.stderr.String())
		}
	}
}

// runScript runs the scenario script to its end and returns its one JSON
// object.
func runScript(t *testing.T, l lang, scenario string, s *server, f *fixture, env ...string) map[string]any {
	t.Helper()
	lines := startScript(t, l, scenario, s, f, env...).wait(t)
	if len(lines) != 1 {
		t.Fatalf("%s %s printed %d JSON lines, want 1: %v", l.name, scenario, len(lines), lines)
	}
	return lines[0]
}

// str returns m[k] as a string ("" when absent or not a string).
func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

// num returns m[k] as a number (-1 when absent or not a number).
func num(m map[string]any, k string) float64 {
	f, ok := m[k].(float64)
	if !ok {
		return -1
	}
	return f
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// lossyProxy is a loopback HTTP proxy in front of a server that loses the
// answer of the first request whose method and path end match: it forwards
// the request, lets the server answer (the write is done), then closes the
// client's connection without a byte of that answer. Every other request
// passes through. With lost set to 1 beforehand it loses nothing and only
// counts.
type lossyProxy struct {
	url     string
	lost    atomic.Int32 // answers lost so far (0 or 1)
	matched atomic.Int32 // requests that matched, the lost one included

	mu    sync.Mutex
	gate  chan struct{} // requests wait until it is closed (hold, release)
	held  chan struct{} // gets a value when a request waits at the gate
	conns map[net.Conn]bool
}

// hold makes the requests that arrive from now on wait until release.
func (p *lossyProxy) hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gate = make(chan struct{})
}

// release lets the held requests (and later ones) through.
func (p *lossyProxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.gate)
}

func (p *lossyProxy) waitGate() {
	p.mu.Lock()
	g := p.gate
	p.mu.Unlock()
	select {
	case <-g:
		return
	default:
	}
	select {
	case p.held <- struct{}{}:
	default:
	}
	<-g
}

func startLossyProxy(t *testing.T, target, method, pathSuffix string) *lossyProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &lossyProxy{url: "http://" + ln.Addr().String(), gate: make(chan struct{}), held: make(chan struct{}, 1), conns: map[net.Conn]bool{}}
	close(p.gate)
	tr := &http.Transport{}
	// Ending the test ends every exchange in flight: the upstream requests
	// (an event stream waits for data) and the client connections.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		cancel()
		p.mu.Lock()
		for c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		wg.Wait()
		tr.CloseIdleConnections()
	})
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.conns[conn] = true
			p.mu.Unlock()
			wg.Go(func() {
				defer conn.Close()
				br := bufio.NewReader(conn)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					p.waitGate()
					req = req.WithContext(ctx)
					req.URL.Scheme, req.URL.Host, req.RequestURI = "http", strings.TrimPrefix(target, "http://"), ""
					res, err := tr.RoundTrip(req)
					if err != nil {
						return
					}
					match := req.Method == method && strings.HasSuffix(req.URL.Path, pathSuffix)
					if match {
						p.matched.Add(1)
					}
					if match && p.lost.CompareAndSwap(0, 1) {
						_, _ = io.Copy(io.Discard, res.Body)
						res.Body.Close()
						return // the answer is lost: the connection closes with none of it
					}
					err = res.Write(conn)
					res.Body.Close()
					if err != nil {
						return
					}
				}
			})
		}
	})
	return p
}
