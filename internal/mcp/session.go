package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// finishTimeout bounds the finish of the session's run at shutdown, so that
// the process exits within about 1.5 s of stdin EOF or a signal.
const finishTimeout = time.Second

// Options are a Session's collaborators; zero values take defaults.
type Options struct {
	HTTPClient *http.Client // default: a client with a 30 s timeout per request
	Logger     *slog.Logger // default: discards (stdio sessions log to stderr only)
	// Stateless marks an HTTP session (one request): it never opens,
	// heartbeats or finishes a run; tools that need a run use the one the
	// credential names, or answer that none was named.
	Stateless bool
	// UserAgent of the requests to the clasp server (default "clasp-mcp").
	UserAgent string
}

// Session is one agent's session with a clasp server: the configuration,
// the agent (read once), and the run the tools act in with its heartbeat.
// It is safe for concurrent tool calls.
type Session struct {
	cfg   Config
	opts  Options
	log   *slog.Logger
	base  *client.Client // the configured credential, bound to the launcher's run if any; nil when not configured
	id    string         // random: scopes the idempotency keys of this session's writes
	start time.Time

	mu       sync.Mutex
	me       *clasp.Agent
	run      *clasp.Run     // the run the tools act in; nil until needed (own runs)
	rc       *client.Client // bound to run
	owned    bool           // run was opened by this session (it finishes it)
	lost     error          // the heartbeat found the run gone; the next call reports it
	lastCall time.Time
	held     map[string]string // issue id -> identifier, checked out by run in this session
	hbStop   context.CancelFunc
	idle     bool // the heartbeat stopped for lack of tool calls
	closed   bool

	// branches remembers the branch each grant on this MCP connection named
	// (identifier@epoch -> branch, the company's branch template), for
	// get_issue, whose answer names no workspace; guarded by bmu.
	bmu      sync.Mutex
	branches map[string]string

	// calls ends with endCalls (Serve's context ending: SIGTERM, SIGINT):
	// a tool call in progress, such as a claim waiting for work, stops at
	// once instead of holding the exit until it would have answered.
	calls    context.Context
	endCalls context.CancelFunc
}

// NewSession returns a session for cfg. It makes no network call.
func NewSession(cfg Config, opts Options) *Session {
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "clasp-mcp"
	}
	if cfg.IdleRelease == 0 {
		cfg.IdleRelease = DefaultIdleRelease
	}
	s := &Session{cfg: cfg, opts: opts, log: opts.Logger, id: client.NewIdempotencyKey(), start: time.Now(), held: map[string]string{}, lastCall: time.Now()}
	s.calls, s.endCalls = context.WithCancel(context.Background()) // #nosec G118 -- endCalls is called by Serve when its context ends, and by Close
	if setting, _ := cfg.Missing(); setting == "" {
		s.base = client.New(cfg.URL, client.WithToken(cfg.Token), client.WithRunID(cfg.RunID),
			client.WithHTTPClient(opts.HTTPClient), client.WithUserAgent(opts.UserAgent))
		if cfg.LauncherRun() {
			s.rc = s.base
			if cfg.RunID != "" {
				s.run = &clasp.Run{ID: cfg.RunID}
			}
		}
	}
	return s
}

// errNotConfigured is returned by the session's calls when a setting is
// missing; the tools turn it into a not_configured result.
type errNotConfigured struct{ setting, sentence string }

func (e *errNotConfigured) Error() string { return e.sentence }

// errNoRun is returned by a stateless session for a tool that needs a run
// when the credential names none.
var errNoRun = errors.New("no run named")

// errRunLost carries the sentence about a run found gone, and what it held.
type errRunLost struct {
	runID    string
	released []string
	cause    error
	reopened string // the run opened in its place ("" if none)
}

func (e *errRunLost) Error() string { return "run " + e.runID + " is no longer live" }

// client returns the configured client (no run), or errNotConfigured.
func (s *Session) client() (*client.Client, error) {
	if s.base == nil {
		setting, sentence := s.cfg.Missing()
		return nil, &errNotConfigured{setting: setting, sentence: sentence}
	}
	return s.base, nil
}

// touch records a tool call: the idle timer starts again, and a heartbeat
// stopped for idleness starts again.
func (s *Session) touch() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastCall = time.Now()
	if s.idle && s.run != nil && !s.closed && s.lost == nil {
		s.idle = false
		s.startHeartbeatLocked()
	}
}

// agent returns the calling agent (GET /agents/me, read once).
func (s *Session) agent(ctx context.Context) (*clasp.Agent, error) {
	c, err := s.client()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	me := s.me
	s.mu.Unlock()
	if me != nil {
		return me, nil
	}
	me, err = c.Me(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.me = me
	s.mu.Unlock()
	return me, nil
}

// runClient returns a client bound to the session's run, opening the run
// first when the session owns its runs and has none (invocationSource
// "mcp"; its heartbeat starts). When the heartbeat found the previous run
// gone it opens a new one and returns *errRunLost, so that the caller
// reports the loss instead of acting: a write is never redone silently in
// another run.
func (s *Session) runClient(ctx context.Context) (*client.Client, string, error) {
	if _, err := s.client(); err != nil {
		return nil, "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, "", errors.New("the session is closing")
	}
	if s.cfg.LauncherRun() {
		if s.lost != nil {
			return nil, "", &errRunLost{runID: s.cfg.RunID, released: s.heldListLocked(), cause: s.lost}
		}
		if s.run != nil && s.hbStop == nil && !s.opts.Stateless && !s.idle {
			s.startHeartbeatLocked()
		}
		return s.rc, s.cfg.RunID, nil
	}
	if s.opts.Stateless {
		return nil, "", errNoRun
	}
	if s.lost != nil {
		old := s.run
		lost := &errRunLost{runID: old.ID, released: s.heldListLocked(), cause: s.lost}
		s.run, s.rc, s.lost, s.held = nil, nil, nil, map[string]string{}
		if err := s.openLocked(ctx); err == nil {
			lost.reopened = s.run.ID
		}
		return nil, "", lost
	}
	if s.run == nil {
		if err := s.openLocked(ctx); err != nil {
			return nil, "", err
		}
	}
	return s.rc, s.run.ID, nil
}

// openLocked opens a self-reported run and starts its heartbeat.
func (s *Session) openLocked(ctx context.Context) error {
	ictx := client.WithIdempotencyKey(ctx, client.NewIdempotencyKey())
	run, err := s.base.RunOpen(ictx, client.RunOpenRequest{InvocationSource: InvocationSource})
	if err != nil {
		return err
	}
	s.run, s.owned = run, true
	s.rc = s.base.WithRun(run.ID)
	if run.RunToken != "" {
		s.rc = s.base.WithToken(run.RunToken).WithRun(run.ID)
	}
	s.idle = false
	s.startHeartbeatLocked()
	s.log.Info("opened run", "run", run.ID, "lease_ttl", leaseTTL(run))
	return nil
}

// startHeartbeatLocked starts renewing s.run's lease every third of its
// TTL. It stops when the session closes, when IdleRelease passes without a
// tool call (the lease then runs out: a session waiting on a human holds
// nothing for ever), or when the server says the run is gone.
func (s *Session) startHeartbeatLocked() {
	if s.run == nil || s.opts.Stateless {
		return
	}
	if s.hbStop != nil {
		return // already beating
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.hbStop = cancel
	run, rc, idle := s.run, s.rc, s.cfg.IdleRelease
	go func() {
		defer cancel()
		interval := max(leaseTTL(run)/3, 50*time.Millisecond)
		if run.LeaseExpiresAt == nil {
			// A launcher's run: learn its TTL from a first heartbeat.
			r, err := rc.RunHeartbeat(ctx, run.ID)
			if s.heartbeatFailed(ctx, run.ID, err) {
				return
			}
			if r != nil {
				interval = max(leaseTTL(r)/3, 50*time.Millisecond)
			}
		}
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			s.mu.Lock()
			quiet := time.Since(s.lastCall)
			if idle > 0 && quiet > idle {
				if s.run == run {
					s.idle = true
					s.hbStop = nil
				}
				s.mu.Unlock()
				s.log.Info("no tool call for the idle release time: heartbeat stopped; the run's lease will run out and its issues go back to the pool", "run", run.ID, "idle", quiet.Round(time.Second))
				return
			}
			s.mu.Unlock()
			_, err := rc.RunHeartbeat(ctx, run.ID)
			if s.heartbeatFailed(ctx, run.ID, err) {
				return
			}
		}
	}()
}

// heartbeatFailed handles a heartbeat answer: true when the heartbeat must
// stop (the run is gone: recorded for the next tool call; or ctx ended).
func (s *Session) heartbeatFailed(ctx context.Context, runID string, err error) bool {
	switch {
	case err == nil:
		return false
	case ctx.Err() != nil:
		return true
	case clasp.ErrorCode(err) == clasp.CodeRunNotLive || clasp.ErrorCode(err) == clasp.CodeUnauthenticated:
		s.mu.Lock()
		if s.run != nil && s.run.ID == runID {
			s.lost = err
			s.hbStop = nil
		}
		s.mu.Unlock()
		s.log.Warn("run is no longer live", "run", runID, "err", err)
		return true
	default:
		s.log.Warn("heartbeat failed", "run", runID, "err", err)
		return false
	}
}

// runGone reports whether err, answered to a call in the session's run
// runID, says that run is no longer live, and if so records the loss (the
// next call in an owned session opens a new run) and returns *errRunLost.
// A run token of an ended run answers 401; the API key then tells whether
// the run ended.
func (s *Session) runGone(ctx context.Context, runID string, err error) error {
	code := clasp.ErrorCode(err)
	if code != clasp.CodeRunNotLive && code != clasp.CodeUnauthenticated {
		return nil
	}
	if code == clasp.CodeUnauthenticated {
		if s.cfg.RunToken() || runID == "" {
			return nil // the credential itself is the run token: say it is refused
		}
		r, gerr := s.base.RunGet(ctx, runID)
		if gerr != nil || r.Live(time.Now()) {
			return nil
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	lost := &errRunLost{runID: runID, released: s.heldListLocked(), cause: err}
	if s.run == nil || s.run.ID != runID {
		return lost // another call already replaced it
	}
	if s.cfg.LauncherRun() {
		s.lost = err
		return lost
	}
	if s.hbStop != nil {
		s.hbStop()
		s.hbStop = nil
	}
	s.run, s.rc, s.lost, s.held = nil, nil, nil, map[string]string{}
	if oerr := s.openLocked(ctx); oerr == nil {
		lost.reopened = s.run.ID
	} else {
		s.log.Warn("open a new run", "err", oerr)
	}
	return lost
}

// hold records that the session's run holds the issue.
func (s *Session) hold(iss *clasp.Issue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held[iss.ID] = iss.Identifier
}

// drop records that the session's run no longer holds the issue.
func (s *Session) drop(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.held, id)
}

func (s *Session) heldListLocked() []string {
	out := make([]string, 0, len(s.held))
	for _, ident := range s.held {
		out = append(out, ident)
	}
	sort.Strings(out)
	return out
}

// snapshot returns what session_status shows.
func (s *Session) snapshot() (run *clasp.Run, owned, idle bool, held []string, lastCall time.Time, lost error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.run, s.owned, s.idle, s.heldListLocked(), s.lastCall, s.lost
}

// idemKey derives an Idempotency-Key for one logical write of this
// session: a retry of the same write (same parts) sends the same key, so
// the server applies it once.
func (s *Session) idemKey(parts ...string) string {
	h := sha256.Sum256([]byte(s.id + "\x00" + strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:16])
}

// Close ends the session: the heartbeat stops and a run the session opened
// is finished with status (succeeded on stdin EOF, cancelled on a signal),
// which releases every lock it holds (rule L6). A launcher's run is left
// alone. It waits at most about a second for the server.
func (s *Session) Close(status clasp.RunStatus) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.endCalls()
	if s.hbStop != nil {
		s.hbStop()
		s.hbStop = nil
	}
	run, rc, owned := s.run, s.rc, s.owned
	s.mu.Unlock()
	if run == nil || !owned {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), finishTimeout)
	defer cancel()
	_, err := rc.RunFinish(ctx, run.ID, client.RunFinishRequest{Status: status})
	if err != nil && clasp.ErrorCode(err) != clasp.CodeRunNotLive {
		s.log.Warn("finish run", "run", run.ID, "status", status, "err", err)
		return fmt.Errorf("finish run %s: %w", run.ID, err)
	}
	s.log.Info("finished run", "run", run.ID, "status", status)
	return nil
}

// leaseTTL is the lease TTL the server grants, read off a fresh run (its
// lease minus its last sign of life); 60 s when the run does not say.
func leaseTTL(r *clasp.Run) time.Duration {
	if r != nil && r.LeaseExpiresAt != nil {
		from := r.StartedAt
		if r.LastSignOfLifeAt != nil {
			from = r.LastSignOfLifeAt
		}
		if from != nil {
			if d := r.LeaseExpiresAt.Sub(*from); d > 0 {
				return d
			}
		}
	}
	return 60 * time.Second
}
