package securitytest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
	"github.com/clasp-dev/clasp/internal/serveproc"
)

// claspBin is the clasp binary TestMain builds for the suite.
var claspBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "clasp-securitytest-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Other users (serve --agent-user) may need to run it: 0755.
	_ = os.Chmod(dir, 0o755)
	claspBin = filepath.Join(dir, "clasp")
	build := exec.Command("go", "build", "-o", claspBin, "github.com/clasp-dev/clasp/cmd/clasp")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build clasp:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// randHex is n random bytes in hex.
func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// storeKinds runs fn once on SQLite and once on PostgreSQL (a fresh
// database; skipped without CLASP_TEST_POSTGRES_URL, failed without it in
// CI). databaseURL is "" for SQLite.
func storeKinds(t *testing.T, fn func(t *testing.T, databaseURL string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, "") })
	t.Run("postgres", func(t *testing.T) {
		admin := os.Getenv(serveproc.EnvTestPostgresURL)
		if admin == "" {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not set in CI", serveproc.EnvTestPostgresURL)
			}
			t.Skipf("%s is not set", serveproc.EnvTestPostgresURL)
		}
		u, drop, err := serveproc.CreateDatabase(context.Background(), admin, "clasp_sec")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = drop(context.Background()) })
		fn(t, u)
	})
}

// prefix is a random issue prefix (companies need distinct ones).
func prefix() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = 'A' + b[i]%26
	}
	return string(b)
}

// server is a running `clasp serve` process of the suite.
type server struct {
	URL        string
	BoardToken string
	Dir        string // the server's working directory
	DataDir    string // absolute; the server was given the relative ".clasp"
	PprofAddr  string // host:port of --pprof, when given
	CAFile     string // the CA the board client trusts (an https:// server); "" the system's
	cmd        *exec.Cmd

	mu     sync.Mutex
	stdout strings.Builder // all the server printed on stdout and stderr
}

// serveOpts configures startServer.
type serveOpts struct {
	DatabaseURL string   // passed as CLASP_DATABASE_URL in the server's environment ("" SQLite)
	Env         []string // more KEY=VALUE of the server's environment
	Args        []string // more serve flags
	// Traversable makes the server's directory 0711 (and its parent),
	// so another user (serve --agent-user) can reach <data-dir>/runs.
	Traversable bool
	// Pprof: the server was given --pprof; wait for its address too.
	Pprof       bool
	readyClosed bool
}

// startServer starts `clasp serve --listen 127.0.0.1:0 --data-dir .clasp`
// in a fresh directory, with a small environment plus o.Env, and waits
// (up to a minute) until it listens. The server is stopped (SIGTERM) at
// the end of the test.
func startServer(t *testing.T, o serveOpts) *server {
	t.Helper()
	dir, err := os.MkdirTemp("", "clasp-sec-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if o.Traversable {
		if err := os.Chmod(dir, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	s := &server{Dir: dir, DataDir: filepath.Join(dir, ".clasp")}
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", ".clasp", "--log-level", "info"}, o.Args...)
	cmd := exec.Command(claspBin, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "LANG=C.UTF-8"}, o.Env...)
	if o.DatabaseURL != "" {
		cmd.Env = append(cmd.Env, "CLASP_DATABASE_URL="+o.DatabaseURL)
	}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.cmd = cmd
	exited := make(chan struct{}) // closed when the process is reaped; then waitErr is set
	var waitErr error
	go func() { waitErr = cmd.Wait(); pw.Close(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	boardRe := regexp.MustCompile(`^board token: (clasp_\S+)$`)
	listenRe := regexp.MustCompile(`^clasp listening on (https?://\S+)$`)
	pprofRe := regexp.MustCompile(`^pprof on http://(\S+)/debug/pprof/$`)
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.stdout.WriteString(line + "\n")
			if m := boardRe.FindStringSubmatch(line); m != nil {
				s.BoardToken = m[1]
			}
			if m := pprofRe.FindStringSubmatch(line); m != nil {
				s.PprofAddr = m[1]
			}
			if m := listenRe.FindStringSubmatch(line); m != nil && s.URL == "" {
				s.URL = m[1]
				if !o.Pprof {
					close(ready)
				}
			}
			if s.URL != "" && o.Pprof && s.PprofAddr != "" && !o.readyClosed {
				o.readyClosed = true
				close(ready)
			}
			s.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	select {
	case <-ready:
	case <-exited:
		t.Fatalf("clasp serve exited before listening (%v):\n%s", waitErr, s.output())
	case <-time.After(time.Minute):
		t.Fatalf("clasp serve did not listen within a minute:\n%s", s.output())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.BoardToken == "" {
		t.Fatalf("clasp serve printed no board token:\n%s", s.stdout.String())
	}
	return s
}

// output is what the server printed so far.
func (s *server) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stdout.String()
}

// board is a client of s with the board token.
func (s *server) board() *client.Client {
	if s.CAFile != "" {
		return client.New(s.URL, client.WithToken(s.BoardToken), client.WithCACert(s.CAFile))
	}
	return client.New(s.URL, client.WithToken(s.BoardToken))
}

// managedAgent creates a company and an agent whose adapter runs
// /bin/sh -c script with env, and returns the agent.
func (s *server) managedAgent(t *testing.T, script string, env map[string]string) *clasp.Agent {
	t.Helper()
	ctx := context.Background()
	b := s.board()
	co, err := b.CompanyCreate(ctx, client.CompanyCreateRequest{Name: "Sec " + randHex(3), IssuePrefix: prefix()})
	if err != nil {
		t.Fatal(err)
	}
	ag, err := b.AgentCreate(ctx, co.ID, client.AgentCreateRequest{Name: "managed"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.AgentSetAdapter(ctx, ag.ID, &clasp.AdapterConfig{Type: clasp.AdapterProcess, Command: "/bin/sh",
		Args: []string{"-c", script}, Env: env, TimeoutSec: 120, Heartbeat: clasp.HeartbeatConfig{Enabled: true}}); err != nil {
		t.Fatal(err)
	}
	return ag
}

// wake queues a run of agent ag and returns its id.
func (s *server) wake(t *testing.T, ag *clasp.Agent) string {
	t.Helper()
	w, err := s.board().AgentWake(context.Background(), ag.ID, client.WakeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if w.RunID == nil {
		t.Fatalf("wake answered %+v, want a queued run", w)
	}
	return *w.RunID
}

// waitRun polls run id (generous bound, not a timing assertion) until it
// ends and returns it.
func (s *server) waitRun(t *testing.T, id string) *clasp.Run {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		r, err := s.board().RunGet(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Terminal() {
			return r
		}
	}
	t.Fatalf("run %s did not end; server output:\n%s", id, s.output())
	return nil
}

// runLog is the whole captured output of run id.
func (s *server) runLog(t *testing.T, id string) string {
	t.Helper()
	c, err := s.board().RunLog(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	return string(c.Data)
}
