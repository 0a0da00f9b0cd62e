package serveproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ServerConfig configures a `clasp serve` child process.
type ServerConfig struct {
	// Binary is the clasp executable (required).
	Binary string
	// Args follow "serve": --data-dir, --database-url, --lease-ttl, ...
	// They must not set --listen (Listen does).
	Args []string
	// Listen is the first start's address; default "127.0.0.1:0" (a free
	// port). Restarts reuse the address the first start bound.
	Listen string
	// Env is added to the environment. CLASP_LISTEN, CLASP_DATA_DIR and
	// CLASP_DATABASE_URL are cleared first, so that the caller's
	// environment cannot point the server elsewhere; set them here to
	// override.
	Env []string
	// Log receives the server's stderr (its logs) and its stdout banner;
	// default: discarded. It must be safe for concurrent writes when
	// several servers share it (an *os.File is).
	Log io.Writer
	// StartTimeout bounds how long a start may take to print its address
	// (a guard against a hung process, not a timing check); default 2 min.
	StartTimeout time.Duration
}

// Server is a running (or killed) `clasp serve` child process. It is safe
// for concurrent use. Build it with StartServer; Stop or Kill it when done.
type Server struct {
	cfg ServerConfig

	mu         sync.Mutex
	addr       string // bound host:port, fixed by the first start
	boardToken string // printed by a start that created it
	proc       *process
}

// process is one OS process of a Server.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd.Wait returned
	err    error         // cmd.Wait's result, set before exited is closed
}

// ErrExited is returned (wrapped) by StartServer and Restart when the
// process exited before it printed its address.
var ErrExited = errors.New("clasp serve exited before listening")

// StartServer starts `clasp serve --listen cfg.Listen cfg.Args...` and
// waits until it prints "clasp listening on <URL>". It records the bound
// address (Restart reuses it) and the board token when this start printed
// one. ctx bounds the start only; the process runs until Kill or Stop.
func StartServer(ctx context.Context, cfg ServerConfig) (*Server, error) {
	if cfg.Binary == "" {
		return nil, errors.New("serveproc: ServerConfig.Binary is required")
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 2 * time.Minute
	}
	s := &Server{cfg: cfg, addr: cfg.Listen}
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// URL is the server root, http://host:port; it stays the same across
// restarts.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return "http://" + s.addr
}

// Addr is the bound host:port.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// BoardToken is the board token a start of this Server printed (the start
// that created it, on a fresh database), or "".
func (s *Server) BoardToken() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.boardToken
}

// PID is the current process id (0 before the first start).
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// Running reports whether the current process has not exited.
func (s *Server) Running() bool {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Kill sends SIGKILL to the current process and waits until it is reaped.
// Killing a process that already exited is a no-op.
func (s *Server) Kill() {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// Stop sends SIGTERM (a graceful shutdown) and waits for the exit; when ctx
// ends first it sends SIGKILL. It returns the process's exit error (nil
// for a clean exit).
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return p.err
	case <-ctx.Done():
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("clasp serve did not stop after SIGTERM: %w", ctx.Err())
	}
}

// Restart starts a new process with the same arguments on the same
// address, after the previous one was killed or stopped (it kills the
// previous one if it still runs). The port was ours a moment ago, so a bind
// failure is retried a few times.
func (s *Server) Restart(ctx context.Context) error {
	s.Kill()
	var err error
	for attempt := 0; attempt < 10; attempt++ {
		if err = s.start(ctx); err == nil || !errors.Is(err, ErrExited) {
			return err
		}
		t := time.NewTimer(time.Duration(attempt+1) * 100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
	return err
}

// start starts one process on s.addr and waits for its banner.
func (s *Server) start(ctx context.Context) error {
	s.mu.Lock()
	addr := s.addr
	s.mu.Unlock()
	args := append([]string{"serve", "--listen", addr}, s.cfg.Args...)
	cmd := exec.Command(s.cfg.Binary, args...) // #nosec G204 -- the clasp binary under test, started without a shell
	cmd.Env = append(os.Environ(), "CLASP_LISTEN=", "CLASP_DATA_DIR=", "CLASP_DATABASE_URL=")
	cmd.Env = append(cmd.Env, s.cfg.Env...)
	cmd.Stderr = s.cfg.Log
	setDeathSignal(cmd)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.cfg.Binary, err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	type banner struct{ url, token string }
	got := make(chan banner, 1)
	go func() {
		var b banner
		sent := false
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintf(s.cfg.Log, "[serve stdout] %s\n", line)
			if tok, ok := strings.CutPrefix(line, "board token: "); ok && strings.HasPrefix(tok, "clasp_bt_") {
				b.token = tok
			}
			if u, ok := strings.CutPrefix(line, "clasp listening on "); ok && !sent {
				b.url = strings.TrimSpace(u)
				got <- b
				sent = true
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		if !sent {
			close(got)
		}
		p.err = cmd.Wait()
		close(p.exited)
	}()

	timer := time.NewTimer(s.cfg.StartTimeout)
	defer timer.Stop()
	select {
	case b, ok := <-got:
		if !ok {
			<-p.exited
			return fmt.Errorf("%w (%s %s): %v", ErrExited, s.cfg.Binary, strings.Join(args, " "), p.err)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.addr = strings.TrimPrefix(b.url, "http://")
		if b.token != "" {
			s.boardToken = b.token
		}
		s.proc = p
		return nil
	case <-ctx.Done():
	case <-timer.C:
	}
	_ = cmd.Process.Kill()
	<-p.exited
	if ctx.Err() != nil {
		return fmt.Errorf("start clasp serve: %w", ctx.Err())
	}
	return fmt.Errorf("start clasp serve: no address printed within %s", s.cfg.StartTimeout)
}
