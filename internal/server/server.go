// Package server builds and runs clasp's HTTP server on an open store: the
// API (package httpapi) behind the web board (package board), the MCP
// endpoint at /mcp (package mcp), the recovery sweeper (package recovery)
// and, when asked, the heartbeat scheduler of server-managed agents
// (package heartbeat). It is the one wiring of the server: `clasp serve`
// (and through it the embedded servers of `clasp swarm` and `clasp
// verify`) and the in-process servers of `clasp bench` start it here.
//
// The caller owns the store and the listener's address: it opens (and
// migrates) the store, binds the listener, and closes the store after
// Shutdown.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/clasp-dev/clasp/internal/board"
	"github.com/clasp-dev/clasp/internal/heartbeat"
	"github.com/clasp-dev/clasp/internal/httpapi"
	"github.com/clasp-dev/clasp/internal/mcp"
	"github.com/clasp-dev/clasp/internal/metrics"
	"github.com/clasp-dev/clasp/internal/recovery"
	"github.com/clasp-dev/clasp/internal/store"
	"github.com/clasp-dev/clasp/internal/webhook"
)

// ReadHeaderTimeout is how long the server waits for a request's header
// (slow-header clients are cut off after it). There is no ReadTimeout: it
// would cut the event stream; bodies have their own read deadline
// (httpapi.Config.BodyReadTimeout).
const ReadHeaderTimeout = 5 * time.Second

// DefaultShutdownTimeout is Config.ShutdownTimeout's default.
const DefaultShutdownTimeout = 10 * time.Second

// Config configures Start. Store is required; zero fields take the
// defaults named on them.
type Config struct {
	// Store holds all state; both SQLite and PostgreSQL stores implement
	// it. Start neither opens nor closes it.
	Store store.HeartbeatStore
	// Logger receives the server's logs. Default: discard.
	Logger *slog.Logger
	// LeaseTTL is the lease every sign of life gives a run (httpapi's
	// default, 60 s, when zero).
	LeaseTTL time.Duration
	// SweepInterval is the time between sweeper passes
	// (recovery.DefaultInterval when zero).
	SweepInterval time.Duration
	// LocalTrusted makes tokenless requests from a loopback Host the
	// board; the caller must bind a loopback address only.
	LocalTrusted bool
	// RequireRunToken makes checkout, release, issue PATCH, run heartbeat
	// and run finish by agents accept run tokens only.
	RequireRunToken bool
	// BoardReadOnly makes the web board at / hide and refuse every action.
	BoardReadOnly bool
	// Limits are the rate limits and caps; zero fields take their defaults.
	Limits httpapi.Limits
	// TLS, when set, serves HTTPS with it (its certificate is in it); the
	// API URL the scheduler hands agents is then https://.
	TLS *tls.Config
	// RunLogDir holds the run logs of server-managed runs, served by GET
	// /api/runs/{id}/log and written by the scheduler. "": no logs.
	RunLogDir string
	// Agents, when set, runs the heartbeat scheduler of server-managed
	// agents; nil: wakes are only recorded and cancels end runs in the
	// store.
	Agents *Agents
	// ShutdownTimeout is how long in-flight requests get at Shutdown
	// before their connections are closed. Default DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// RequestDeadline bounds every API request but the event stream
	// (httpapi.Config.RequestDeadline). Zero: none.
	RequestDeadline time.Duration
	// BodyReadTimeout bounds the arrival of a request's body on every
	// route (httpapi.Config.BodyReadTimeout). Zero: its default.
	BodyReadTimeout time.Duration
	// Webhooks configures the dispatcher of webhook deliveries (RULES.md,
	// Webhooks); its AllowPrivate also lets subscriptions name private
	// addresses. Logger is the server's when unset.
	Webhooks webhook.Config
}

// Agents configures the heartbeat scheduler (see heartbeat.Config).
type Agents struct {
	// WorkDir is the parent of the per-run working directories.
	WorkDir string
	// User, when set, is the user server-managed processes run as.
	User *heartbeat.AgentUser
	// UIDs, when set, gives each agent a uid of its own from this range
	// (heartbeat.Config.AgentUIDs); its home is under HomeDir.
	UIDs    *heartbeat.UIDRange
	HomeDir string
	// CACert is the PEM file agents trust for the server's https:// URL
	// (heartbeat.Config.CACert); "" gives them none.
	CACert string
}

// Server is a started server. Its methods are safe for concurrent use.
type Server struct {
	url     string
	cfg     Config
	api     *httpapi.Server
	sweeper *recovery.Sweeper
	hooks   *webhook.Dispatcher
	sched   *heartbeat.Scheduler // nil without Config.Agents
	hs      *http.Server
	served  chan error // Serve's result: one value, then closed
}

// Start builds the server on cfg.Store and starts it on ln: the sweeper,
// the scheduler (with Config.Agents) and HTTP(S) on ln, which it takes
// over (Shutdown closes it). The sweeper and the scheduler run until ctx
// ends or Shutdown is called; requests' contexts do not end with ctx.
//
// Unless GOGC is set, the process's garbage collector is paced for a
// server's small live heap from then on (gctune.go: the heap grows to
// GCHeapFloor, at most GCMaxPercent over the live data, before a
// collection).
//
// It returns an error (and closes ln) if the board cannot be built or the
// sweeper or the scheduler cannot start.
func Start(ctx context.Context, ln net.Listener, cfg Config) (*Server, error) {
	if cfg.Store == nil {
		_ = ln.Close() // the missing store is the error returned
		return nil, errors.New("server: Config.Store is nil")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	tuneGC()
	log := cfg.Logger
	s := &Server{cfg: cfg, served: make(chan error, 1)}
	s.url = "http://" + ln.Addr().String()
	if cfg.TLS != nil {
		s.url = "https://" + ln.Addr().String()
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(reg)
	// The scheduler runs server-managed agents as processes of this host;
	// the API nudges it and cancels through it.
	var apiSched httpapi.Scheduler // stays a nil interface without a scheduler
	if a := cfg.Agents; a != nil {
		s.sched = heartbeat.New(cfg.Store, heartbeat.Config{APIURL: s.url, LeaseTTL: cfg.LeaseTTL, Logger: log,
			LogDir: cfg.RunLogDir, WorkDir: a.WorkDir, AgentUser: a.User, AgentUIDs: a.UIDs, HomeDir: a.HomeDir, CACert: a.CACert,
			NewRunToken: func() (string, string) { return httpapi.NewToken(httpapi.TokenRun) }})
		apiSched = s.sched
	}
	// The sweeper also sends the dependency wakes (RULES.md D8): the API
	// nudges it after a write that may make an issue ready, and it nudges
	// the scheduler when a wake queued a run.
	rcfg := recovery.Config{Interval: cfg.SweepInterval, Logger: log, Metrics: m}
	if s.sched != nil {
		sched := s.sched
		rcfg.AfterWakes = func(int) { sched.Nudge() }
	}
	s.sweeper = recovery.NewSweeper(cfg.Store, rcfg)
	// The webhook dispatcher wakes on every write of the store (and, on
	// PostgreSQL, of every replica) while a subscription is enabled, when
	// the API changes a subscription, and polls as a fallback.
	wcfg := cfg.Webhooks
	if wcfg.Logger == nil {
		wcfg.Logger = log
	}
	s.hooks = webhook.New(cfg.Store, wcfg)
	s.api = httpapi.New(httpapi.Config{
		Store:               cfg.Store,
		Logger:              log,
		LeaseTTL:            cfg.LeaseTTL,
		LocalTrusted:        cfg.LocalTrusted,
		RequireRunToken:     cfg.RequireRunToken,
		Registry:            reg,
		Metrics:             m,
		Scheduler:           apiSched,
		Dependencies:        s.sweeper,
		Webhooks:            s.hooks,
		RunLogDir:           cfg.RunLogDir,
		Limits:              cfg.Limits,
		RequestDeadline:     cfg.RequestDeadline,
		BodyReadTimeout:     cfg.BodyReadTimeout,
		WebhookAllowPrivate: cfg.Webhooks.AllowPrivate,
	})
	// The web board at / in front of the API; /mcp: the stateless MCP
	// endpoint, whose tools call the API in process.
	web, err := board.New(board.Config{API: s.api.Handler(), LocalTrusted: cfg.LocalTrusted, ReadOnly: cfg.BoardReadOnly, Logger: log,
		TrustedProxies: cfg.Limits.TrustedProxies})
	if err != nil {
		_ = ln.Close() // the board's error is the one returned
		return nil, err
	}
	// /mcp meets the API's header cap and per-address rate limit; the API
	// calls its tools make in process are not counted twice.
	// Both read a request's body by the API's rules (its timeout and cap)
	// before they see it.
	mcpH := s.api.BodyDeadline(s.api.Guard(mcp.NewHTTPHandler(s.api.Handler(), log, cfg.Limits.TrustedProxies)))
	webH := s.api.BodyDeadline(web.Handler())

	if err := s.sweeper.Start(ctx); err != nil {
		_ = ln.Close() // the sweeper's error is the one returned
		return nil, fmt.Errorf("start sweeper: %w", err)
	}
	s.hooks.Start(ctx)
	// The scheduler registers this server as an instance at start.
	if s.sched != nil {
		if err := s.sched.Start(ctx); err != nil {
			s.sweeper.Stop()
			s.hooks.Stop()
			_ = ln.Close() // the scheduler's error is the one returned
			return nil, fmt.Errorf("start heartbeat scheduler: %w", err)
		}
	}

	s.hs = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if s.api.ViaTLS(r) {
				// Browsers that once reached the server over TLS never
				// again send it a token in clear.
				w.Header().Set("Strict-Transport-Security", httpapi.HSTS)
			}
			if r.URL.Path == "/mcp" {
				mcpH.ServeHTTP(w, r)
				return
			}
			webH.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: ReadHeaderTimeout,
		MaxHeaderBytes:    httpapi.HeaderReadLimit,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		TLSConfig:         cfg.TLS,
	}
	go func() {
		if cfg.TLS != nil {
			s.served <- s.hs.ServeTLS(ln, "", "") // the certificate is in cfg.TLS
		} else {
			s.served <- s.hs.Serve(ln)
		}
		close(s.served)
	}()
	return s, nil
}

// URL is the server's base URL: http:// or https:// and the listener's
// host:port.
func (s *Server) URL() string { return s.url }

// Failed receives the error of the listener when serving stops before
// Shutdown (serving never stops by itself otherwise).
func (s *Server) Failed() <-chan error { return s.served }

// Shutdown stops the server gracefully: the API refuses new work
// (httpapi's BeginShutdown), in-flight requests get Config.ShutdownTimeout
// (then their connections are closed), then the scheduler and the sweeper
// stop. It returns the shutdown's error when the timeout cut requests
// short (already handled: the connections are closed), else nil. The
// store stays open. Call it once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.api.BeginShutdown()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	err := s.hs.Shutdown(sctx)
	if err != nil {
		_ = s.hs.Close() // forced close after a timed-out shutdown, reported by the returned error
	}
	<-s.served // http.ErrServerClosed, or the listener's earlier error
	if s.sched != nil {
		s.sched.Stop()
	}
	s.sweeper.Stop()
	s.hooks.Stop()
	return err
}
