package cli

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/heartbeat"
	"github.com/clasp-dev/clasp/internal/httpapi"
	"github.com/clasp-dev/clasp/internal/secret"
	"github.com/clasp-dev/clasp/internal/server"
	"github.com/clasp-dev/clasp/internal/store"
	"github.com/clasp-dev/clasp/internal/store/postgres"
	"github.com/clasp-dev/clasp/internal/store/sqlite"
	"github.com/clasp-dev/clasp/internal/webhook"
)

// EnvDatabaseURL sets --database-url of serve and migrate.
const EnvDatabaseURL = "CLASP_DATABASE_URL"

// Defaults of `clasp serve`.
const (
	DefaultDataDir         = ".clasp"
	DefaultListen          = "127.0.0.1:3100"
	DefaultLeaseTTL        = 60 * time.Second
	DefaultSweepInterval   = 10 * time.Second
	DefaultShutdownTimeout = 10 * time.Second
	DefaultDBWait          = 2 * time.Minute
	DefaultRequestDeadline = 30 * time.Second
)

// Files under the data directory.
const (
	DBFileName         = "clasp.db"
	BoardTokenFileName = "board-token"
)

// boardTokenSetting is the store setting holding the board token's hash.
const boardTokenSetting = "board_token_hash"

// ServeConfig configures Serve. Zero fields take the defaults of `clasp serve`.
type ServeConfig struct {
	DataDir     string // database at DataDir/clasp.db (unless DatabaseURL); board token at DataDir/board-token
	DatabaseURL string // PostgreSQL URL: when set, the state lives there (any number of replicas may share it), not in DataDir
	DBMaxConns  int    // PostgreSQL pool size; 0: the URL's pool_max_conns, else postgres.DefaultMaxConns (20)
	// DBWait is how long Serve keeps trying to reach an unreachable
	// PostgreSQL database at start (see openStoreWaiting). 0:
	// DefaultDBWait; negative: fail at the first try.
	DBWait time.Duration
	// RequestDeadline bounds every API request but the event stream
	// (httpapi.Config.RequestDeadline: a request cut at it answers 503
	// unavailable) and, on PostgreSQL, every statement (statement_timeout),
	// so a request the server gave up on is over on the database within
	// twice this after it arrived. 0: DefaultRequestDeadline; negative: none.
	RequestDeadline time.Duration
	// BodyTimeout is how long a request's body may take to arrive, on
	// every route (the API, /mcp, the board's forms): 408 request_timeout
	// after it. 0: httpapi.DefaultBodyReadTimeout.
	BodyTimeout     time.Duration
	Listen          string        // host:port; port 0 picks a free one
	LeaseTTL        time.Duration // lease every sign of life gives a run
	SweepInterval   time.Duration // time between sweeper passes
	LocalTrusted    bool          // tokenless requests are the board; requires a loopback Listen
	RequireRunToken bool          // checkout, release, PATCH, heartbeat and finish by agents take run tokens only
	BoardReadOnly   bool          // the web board at / hides and refuses every action
	Sync            string        // SQLite synchronous: "full" (default) or "normal"
	ShutdownTimeout time.Duration // how long in-flight requests get after ctx ends
	Logger          *slog.Logger  // default: discard
	Stdout          io.Writer     // the banner (address, board token); default: discard
	// Pprof, when set, is a loopback host:port (port 0 picks one) on which
	// Go's profiler (net/http/pprof, /debug/pprof/) is served on a listener
	// of its own, never on Listen. A non-loopback address is a
	// usage error.
	Pprof string
	// AgentUser, when set (serve --agent-user), is the user name or uid
	// that server-managed agent processes run as; the server must run as
	// root. The data directory is then 0711 and its files 0600, so agents
	// cannot read them.
	AgentUser string
	// AgentUIDRange, when set (serve --agent-uid-range FIRST-LAST), gives
	// each server-managed agent a uid (and gid) of its own from that
	// range, with a home directory <data-dir>/homes/<agentId>; the server
	// must run as root. Exclusive with AgentUser.
	AgentUIDRange string
	// AgentCACert is the PEM file server-managed agents are told to trust
	// for the server's https:// URL (as CLASP_CA_CERT and
	// NODE_EXTRA_CA_CERTS). Default with TLS: Net.TLSCert, which a client
	// trusts when the certificate is self-signed or its chain ends in the
	// CA it holds. Unused without TLS.
	AgentCACert string
	// Net is the transport security and abuse limits (TLS, mTLS, plain
	// HTTP off loopback, rate limits, caps, trusted proxies): see NetConfig.
	Net NetConfig
	// WebhookAllowPrivate lets webhook subscriptions reach loopback,
	// private and link-local addresses (RULES.md W5).
	WebhookAllowPrivate bool
	// WebhookTimeout bounds one delivery attempt (webhook.DefaultTimeout
	// when zero).
	WebhookTimeout time.Duration
	// WebhookRetryBase is the delay after a delivery's first failed
	// attempt, doubled at each later one up to an hour
	// (webhook.DefaultRetryBase when zero).
	WebhookRetryBase time.Duration
}

// ServeInfo describes a started server; Serve sends it on its ready channel.
type ServeInfo struct {
	Addr           string // the bound host:port
	URL            string // http://Addr
	DBPath         string // DataDir/clasp.db; the URL without its password with DatabaseURL
	BoardToken     string // the board token when known: created at this start, or read back from BoardTokenFile
	BoardTokenFile string // DataDir/board-token
	SchemaVersion  int64
	PprofAddr      string // the bound host:port of --pprof; "" without it
}

// Serve runs the clasp server until ctx ends, then shuts it down gracefully
// (in-flight requests get cfg.ShutdownTimeout, then the scheduler and the
// sweeper stop and the database is closed). It opens (creating and
// migrating) the database: PostgreSQL at cfg.DatabaseURL when set, else
// SQLite at DataDir/clasp.db. It creates the board token at first start
// (printed on cfg.Stdout and written to DataDir/board-token, mode 0600),
// binds cfg.Listen and starts the server of package server (API, board,
// /mcp, sweeper, heartbeat scheduler). When the server accepts connections
// it sends a ServeInfo on ready (if not nil; the send gives up when ctx
// ends, so give it a buffer of 1 or a receiver).
//
// It returns nil after a graceful shutdown, and an error if the server
// cannot start (bad config, database, address in use) or fails.
func Serve(ctx context.Context, cfg ServeConfig, ready chan<- ServeInfo) error {
	m, err := newServeMain(cfg)
	if err != nil {
		return err
	}
	defer m.close()
	if err := m.setup(ctx); err != nil {
		return err
	}
	if err := m.run(ctx); err != nil {
		return err
	}
	if ready != nil {
		select {
		case ready <- m.info:
		case <-ctx.Done():
		}
	}
	return m.wait(ctx)
}

// serveMain is one run of Serve, in steps: newServeMain checks the
// configuration, setup binds the listener and opens the database and the
// board token, run starts the server, wait serves until ctx ends and shuts
// down, close releases what setup acquired.
type serveMain struct {
	cfg       ServeConfig
	log       *slog.Logger
	out       io.Writer
	tls       *tls.Config
	limits    httpapi.Limits
	agentUser *heartbeat.AgentUser
	agentUIDs *heartbeat.UIDRange

	ln        net.Listener
	stopPprof func()
	pprofGate *pprofGate // the admin check of --pprof's listener, given the store once it is open
	st        migratedStore
	unlockDir func() // releases the data directory's locks (the serve lock; with SQLite also the database's)
	srv       *server.Server
	info      ServeInfo
}

// agentCACert is the CA file handed to managed agents: "" without TLS,
// else ServeConfig.AgentCACert, else the server's own certificate file.
func (m *serveMain) agentCACert() string {
	if m.tls == nil {
		return ""
	}
	if m.cfg.AgentCACert != "" {
		return m.cfg.AgentCACert
	}
	return m.cfg.Net.TLSCert
}

// newServeMain applies cfg's defaults and checks it: a usage error for a
// bad flag value, an error for unreadable TLS files or an unknown
// --agent-user.
func newServeMain(cfg ServeConfig) (*serveMain, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m := &serveMain{cfg: cfg, log: cfg.Logger, out: cfg.Stdout}
	var err error
	if m.tls, err = cfg.Net.tlsConfig(); err != nil {
		return nil, err
	}
	if m.limits, err = cfg.Net.limits(); err != nil {
		return nil, err
	}
	if cfg.AgentUIDRange != "" {
		if m.agentUIDs, err = agentUIDRange(cfg.AgentUIDRange, cfg.AgentUser); err != nil {
			return nil, err
		}
	}
	if cfg.AgentUser != "" {
		if m.agentUser, err = lookupAgentUser(cfg.AgentUser); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// setup binds cfg.Listen (first: a busy port fails before anything is
// created or printed) and --pprof's listener, creates the data directory,
// opens the database, creates or reads back the board token and secures
// the data directory, printing the database and board token lines.
func (m *serveMain) setup(ctx context.Context) error {
	cfg, log, out := m.cfg, m.log, m.out
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return listenError(cfg.Listen, err)
	}
	m.ln = ln
	if tcp, ok := ln.Addr().(*net.TCPAddr); cfg.LocalTrusted && (!ok || !tcp.IP.IsLoopback()) {
		return fmt.Errorf("--local-trusted: %s is not a loopback address", ln.Addr())
	}
	if cfg.Pprof != "" {
		m.pprofGate = &pprofGate{}
		stop, addr, err := servePprof(cfg.Pprof, log, m.pprofGate)
		if err != nil {
			return err
		}
		m.stopPprof = stop
		m.info.PprofAddr = addr
	}

	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	info := &m.info
	info.DBPath, info.BoardTokenFile = filepath.Join(cfg.DataDir, DBFileName), filepath.Join(cfg.DataDir, BoardTokenFileName)
	if cfg.DatabaseURL == "" {
		if m.unlockDir, err = useDataDir(cfg.DataDir); err != nil {
			return err
		}
		unlockServe, err := lockServeDir(cfg.DataDir, true)
		if err != nil {
			m.unlockDir()
			m.unlockDir = nil
			return err
		}
		unlockShared := m.unlockDir
		m.unlockDir = func() { unlockServe(); unlockShared() }
	} else if m.unlockDir, err = lockServeDir(cfg.DataDir, false); err != nil {
		return err
	}
	if m.st, err = m.openStoreWaiting(ctx); err != nil {
		return err
	}
	if m.pprofGate != nil {
		m.pprofGate.set(m.st)
	}
	if cfg.DatabaseURL != "" {
		info.DBPath = redactURL(cfg.DatabaseURL)
	}
	info.Addr = ln.Addr().String()
	info.URL = cfg.Net.scheme() + "://" + info.Addr
	if info.SchemaVersion, err = m.st.SchemaVersion(ctx); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	fmt.Fprintf(out, "database %s (schema version %d)\n", info.DBPath, info.SchemaVersion)

	created, err := ensureBoardToken(ctx, m.st, info)
	if err != nil && !created {
		return err
	}
	switch {
	case created && err != nil:
		// The hash is stored: this print is the token's only copy.
		fmt.Fprintf(out, "board token: %s\n", info.BoardToken)
		fmt.Fprintf(out, "  (shown only at this first start; writing it to %s failed: %v)\n", info.BoardTokenFile, err)
		log.Warn("write board token file", "path", info.BoardTokenFile, "err", err)
	case created:
		fmt.Fprintf(out, "board token: %s\n", info.BoardToken)
		fmt.Fprintf(out, "  (shown only at this first start; also written to %s with mode 0600 so scripts can read it)\n", info.BoardTokenFile)
	case info.BoardToken != "":
		fmt.Fprintf(out, "board token: in %s\n", info.BoardTokenFile)
	default:
		fmt.Fprintf(out, "board token: set at first start (its file %s is gone; only its hash is stored)\n", info.BoardTokenFile)
	}
	if err := secureDataDir(cfg.DataDir, filepath.Join(cfg.DataDir, DBFileName), info.BoardTokenFile, m.agentUser != nil || m.agentUIDs != nil); err != nil {
		return err
	}
	if m.agentUser == nil && m.agentUIDs == nil && os.Geteuid() == 0 {
		fmt.Fprintln(out, "warning: running as root without --agent-uid-range or --agent-user: server-managed agents run as root and can read the data directory, the database, the board token and each other's processes; give --agent-uid-range (a uid of its own per agent) to isolate them")
		log.Warn("running as root without --agent-uid-range or --agent-user: managed agents run as root")
	}
	return nil
}

// run starts the server on the listener (server.Start, which takes the
// listener over) with the heartbeat scheduler of server-managed agents,
// and prints the listening line.
func (m *serveMain) run(ctx context.Context) error {
	cfg := m.cfg
	ln := m.ln
	m.ln = nil // server.Start closes it, on success at Shutdown
	srv, err := server.Start(ctx, ln, server.Config{
		Store:           m.st,
		Logger:          m.log,
		LeaseTTL:        cfg.LeaseTTL,
		SweepInterval:   cfg.SweepInterval,
		LocalTrusted:    cfg.LocalTrusted,
		RequireRunToken: cfg.RequireRunToken,
		BoardReadOnly:   cfg.BoardReadOnly,
		Limits:          m.limits,
		TLS:             m.tls,
		RunLogDir:       filepath.Join(cfg.DataDir, "run-logs"),
		Agents: &server.Agents{WorkDir: filepath.Join(cfg.DataDir, RunWorkDirName), User: m.agentUser, UIDs: m.agentUIDs,
			HomeDir: filepath.Join(cfg.DataDir, AgentHomeDirName), CACert: m.agentCACert()},
		ShutdownTimeout: cfg.ShutdownTimeout,
		RequestDeadline: max(cfg.RequestDeadline, 0),
		BodyReadTimeout: cfg.BodyTimeout,
		Webhooks: webhook.Config{AllowPrivate: cfg.WebhookAllowPrivate, Timeout: cfg.WebhookTimeout,
			RetryBase: cfg.WebhookRetryBase},
	})
	if err != nil {
		return err
	}
	m.srv = srv
	fmt.Fprintf(m.out, "clasp listening on %s\n", m.info.URL)
	if m.info.PprofAddr != "" {
		fmt.Fprintf(m.out, "pprof on http://%s/debug/pprof/\n", m.info.PprofAddr)
	}
	m.log.Info("serving", "addr", m.info.Addr, "lease_ttl", cfg.LeaseTTL, "sweep_interval", cfg.SweepInterval,
		"local_trusted", cfg.LocalTrusted, "require_run_token", cfg.RequireRunToken)
	return nil
}

// wait serves until ctx ends, then shuts the server down gracefully. It
// returns nil after that, or the listener's error if serving failed first.
func (m *serveMain) wait(ctx context.Context) error {
	select {
	case err := <-m.srv.Failed():
		// Serving never stops by itself; the listener failed.
		_ = m.srv.Shutdown(ctx) // stops the scheduler and the sweeper; the listener's error is the one returned
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	m.log.Info("shutting down")
	if err := m.srv.Shutdown(ctx); err != nil {
		m.log.Warn("graceful shutdown timed out; closing connections", "err", err)
	}
	return nil
}

// close releases what setup acquired and run did not hand over: the
// listener (when the server did not start), the profiler and the
// database.
func (m *serveMain) close() {
	if m.st != nil {
		if err := m.st.Close(); err != nil {
			m.log.Error("close database", "err", err)
		}
	}
	if m.unlockDir != nil {
		m.unlockDir() // after the store is closed
	}
	if m.stopPprof != nil {
		m.stopPprof()
	}
	if m.ln != nil {
		_ = m.ln.Close() // the server never started; the error that stopped it is the one returned
	}
}

func (c ServeConfig) withDefaults() ServeConfig {
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.SweepInterval <= 0 {
		c.SweepInterval = DefaultSweepInterval
	}
	if c.Sync == "" {
		c.Sync = "full"
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.DBWait == 0 {
		c.DBWait = DefaultDBWait
	}
	if c.RequestDeadline == 0 {
		c.RequestDeadline = DefaultRequestDeadline
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Stdout == nil {
		c.Stdout = io.Discard
	}
	return c
}

func (c ServeConfig) validate() error {
	switch strings.ToLower(c.Sync) {
	case "full", "normal":
	default:
		return usageErr(fmt.Errorf("--sync must be full or normal, not %q", c.Sync))
	}
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return usageErr(fmt.Errorf("--listen %q: want host:port: %w", c.Listen, err))
	}
	if c.Pprof != "" {
		ph, _, err := net.SplitHostPort(c.Pprof)
		if err != nil {
			return usageErr(fmt.Errorf("--pprof %q: want host:port: %w", c.Pprof, err))
		}
		if !isLoopbackHost(ph) {
			return usageErr(fmt.Errorf("--pprof needs a loopback address (127.0.0.1, ::1 or localhost), not %q: the profiler must not be reachable from other machines", c.Pprof))
		}
	}
	if err := c.Net.validate(host); err != nil {
		return err
	}
	if c.LocalTrusted && !isLoopbackHost(host) {
		return usageErr(fmt.Errorf("--local-trusted needs a loopback --listen address (127.0.0.1, ::1 or localhost), not %q", c.Listen))
	}
	return nil
}

// pprofGate lets only admins read the profiler: a profile shows the
// server's memory, goroutines and command line, which any local user
// could read on a loopback listener without it.
type pprofGate struct {
	mu sync.Mutex
	st pprofStore // nil until the store is open
}

// pprofStore is the part of the store the gate reads.
type pprofStore interface {
	OperatorTokenFind(ctx context.Context, tokenHash string) (*clasp.OperatorToken, error)
	SettingGet(ctx context.Context, key string) (string, error)
}

func (g *pprofGate) set(st pprofStore) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.st = st
}

// check answers nil for a request whose Authorization: Bearer is a usable
// admin operator token of every company (the board token is one, also
// before it was first used); otherwise the refusal: 401 unauthenticated
// (no, unknown, revoked or expired token), 403 forbidden (a token that is
// not an admin's, or one scoped to a company), 503
// unavailable (the store is not open yet or failed).
func (g *pprofGate) check(r *http.Request) *clasp.Error {
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return clasp.Errorf(clasp.CodeUnauthenticated, "The profiler needs an admin operator token: send Authorization: Bearer <token> (the board token is one).")
	}
	g.mu.Lock()
	st := g.st
	g.mu.Unlock()
	if st == nil {
		return clasp.Errorf(clasp.CodeUnavailable, "The server is starting; retry shortly.")
	}
	hash := httpapi.HashToken(token)
	t, err := st.OperatorTokenFind(r.Context(), hash)
	if clasp.ErrorCode(err) == clasp.CodeNotFound {
		// The board token of a server from before operator tokens, not
		// yet stored as one.
		if want, serr := st.SettingGet(r.Context(), boardTokenSetting); serr == nil && want == hash {
			return nil
		}
		return clasp.Errorf(clasp.CodeUnauthenticated, "The bearer token is unknown, revoked or expired.")
	}
	if err != nil {
		return clasp.Errorf(clasp.CodeUnavailable, "The token could not be checked; retry shortly.")
	}
	if !t.Usable(time.Now()) {
		return clasp.Errorf(clasp.CodeUnauthenticated, "The bearer token is unknown, revoked or expired.")
	}
	if t.Role != clasp.RoleAdmin {
		return clasp.Errorf(clasp.CodeForbidden, "The profiler is for admin operator tokens only; this token's role is %s.", t.Role)
	}
	if t.CompanyID != nil {
		// A profile shows the whole process: every company's data in
		// memory, every goroutine, the command line.
		return clasp.Errorf(clasp.CodeForbidden, "The profiler shows the whole server, every company's work in it: it is for admin tokens of every company, not one scoped to a company.")
	}
	return nil
}

// handler wraps h with check, answering refusals as the API's JSON errors.
func (g *pprofGate) handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e := g.check(r); e != nil {
			status := map[string]int{clasp.CodeUnauthenticated: http.StatusUnauthorized, clasp.CodeForbidden: http.StatusForbidden}[e.Code]
			if status == 0 {
				status = http.StatusServiceUnavailable
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
			if status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="clasp pprof"`)
			}
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": e.Message, "code": e.Code, "details": map[string]any{}})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// servePprof serves net/http/pprof's handlers on a listener of their own
// at addr (checked loopback by validate; the bound address is checked
// again), to admin operator tokens only (gate). It returns a stop function
// and the bound host:port.
func servePprof(addr string, log *slog.Logger, gate *pprofGate) (stop func(), bound string, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("--pprof: listen on %s: %w", addr, err)
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
		_ = ln.Close() // the setup error is the one returned
		return nil, "", fmt.Errorf("--pprof: %s is not a loopback address", ln.Addr())
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	hs := &http.Server{Handler: loopbackHostOnly(gate.handler(mux)), ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.Serve(ln)
	}()
	log.Info("pprof serving", "addr", ln.Addr().String())
	return func() {
		_ = hs.Close()
		<-done
	}, ln.Addr().String(), nil
}

// listenError is the error of a failed bind of addr: for an address in
// use, a sentence naming --listen and CLASP_LISTEN, the ways to pick
// another; otherwise the bind error itself.
func listenError(addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("listen on %s: the address is already in use (is another clasp serve running?); choose another with --listen HOST:PORT or %s: %w", addr, EnvListen, err)
	}
	return fmt.Errorf("listen on %s: %w", addr, err)
}

// isLoopbackHost reports whether host is "localhost" or a loopback IP.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// settingStore is the part of the store ensureBoardToken needs.
type settingStore interface {
	SettingPutIfAbsent(ctx context.Context, key, value string) (string, error)
	OperatorTokenCreate(ctx context.Context, p *store.OperatorTokenCreateParams) (*clasp.OperatorToken, error)
	OperatorTokenFind(ctx context.Context, tokenHash string) (*clasp.OperatorToken, error)
}

// ensureBoardToken creates the board token at first start: it stores the
// token's hash (setting board_token_hash, if absent) and the token as the
// admin operator token "board" of every company, and writes the token to
// info.BoardTokenFile (mode 0600). It reports whether this call created
// it (then an error is only the failure to write the file, and
// info.BoardToken is set). Otherwise it reads info.BoardToken back from
// the file when the file still holds the first token (stored as the
// "board" operator token now if it was not yet: servers from before
// operator tokens) or a usable admin operator token (the board token
// after clasp board-token rotate).
func ensureBoardToken(ctx context.Context, st settingStore, info *ServeInfo) (bool, error) {
	token, hash := httpapi.NewToken(httpapi.TokenBoard)
	stored, err := st.SettingPutIfAbsent(ctx, boardTokenSetting, hash)
	if err != nil {
		return false, fmt.Errorf("store board token hash: %w", err)
	}
	if stored == hash {
		if err := adoptBoardToken(ctx, st, token); err != nil {
			return false, err
		}
		info.BoardToken = token
		if err := writeSecretFile(info.BoardTokenFile, token+"\n"); err != nil {
			return true, fmt.Errorf("write board token file: %w", err)
		}
		return true, nil
	}
	b, err := os.ReadFile(info.BoardTokenFile)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("read board token file: %w", err)
	}
	t := strings.TrimSpace(string(b))
	switch {
	case t == "":
	case httpapi.HashToken(t) == stored:
		if err := adoptBoardToken(ctx, st, t); err != nil {
			return false, err
		}
		if op, err := st.OperatorTokenFind(ctx, stored); err == nil && op.Usable(time.Now()) {
			info.BoardToken = t
		}
	default:
		if op, err := st.OperatorTokenFind(ctx, httpapi.HashToken(t)); err == nil && op.Usable(time.Now()) && op.Role == clasp.RoleAdmin {
			info.BoardToken = t
		}
	}
	return false, nil
}

// adoptBoardToken stores the board token as the admin operator token
// "board" of every company, unless a token with its hash is stored
// already (then, even revoked, it is left as it is).
func adoptBoardToken(ctx context.Context, st settingStore, token string) error {
	prefix := secret.ID(token)
	if prefix == "" {
		prefix = secret.Prefix + secret.Board
	}
	_, err := st.OperatorTokenCreate(ctx, &store.OperatorTokenCreateParams{Name: "board", Role: clasp.RoleAdmin, TokenHash: httpapi.HashToken(token), Prefix: prefix, At: time.Now()})
	if err != nil && clasp.ErrorCode(err) != clasp.CodeAlreadyExists {
		return fmt.Errorf("store the board token as an operator token: %w", err)
	}
	return nil
}

// writeSecretFile writes s to path with mode 0600, replacing any file there.
func writeSecretFile(path, s string) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600) // #nosec G304 -- the server's own token file in its data directory
	if err != nil {
		return err
	}
	if _, err := f.WriteString(s); err != nil {
		_ = f.Close() // the write error is the one returned
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close() // the sync error is the one returned
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// newLogger returns a text logger on w at the named level.
func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, usageErr(fmt.Errorf("--log-level must be debug, info, warn or error, not %q", level))
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

func (a *app) newServeCmd() *cobra.Command {
	var cfg ServeConfig
	var logLevel string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the clasp server on an embedded SQLite database (or PostgreSQL with --database-url)",
		Long: `Run the clasp server: the HTTP API under /api, /healthz, /readyz and /metrics,
and the sweeper that fails runs whose lease expired and frees their locks.

By default the state lives in <data-dir>/clasp.db (SQLite, WAL), created and
migrated at start; see --database-url below for PostgreSQL.
At first start the server creates the board token (the board's credential),
prints it once and writes it to <data-dir>/board-token (mode 0600). It prints
"clasp listening on http://ADDR" when it accepts connections (--listen with
port 0 picks a free port). SIGINT or SIGTERM stops it gracefully.

--local-trusted makes requests without a token act as the board; it only
binds a loopback address and refuses cross-origin browser writes.

Transport: --tls-cert and --tls-key serve HTTPS (TLS 1.2 or newer);
--tls-client-ca also requires every client to present a certificate signed by
that CA (mTLS). Server-managed agents are told to trust --ca-cert (else the
--tls-cert file) through CLASP_CA_CERT and NODE_EXTRA_CA_CERTS; under
--tls-client-ca they must bring a client certificate of their own. Plain HTTP is refused on a non-loopback --listen address
unless --insecure-http is given (bearer tokens would cross the network in
clear). Requests are rate-limited per client address and per credential
(429 with Retry-After; --rate-* flags, 0 keeps the default, -1 turns one
off); X-Forwarded-For is believed only from a --trusted-proxy.

Durability (SQLite): by default (--sync full) a write is acknowledged only
after its commit is on disk (fsync), so it survives power loss; writes that
arrive while a commit is in flight share the next commit and its fsync (group
commit), each still all-or-nothing. --sync normal skips the fsync at each
commit: an acknowledged write may be lost on power loss, not on a process
crash.

With --database-url postgres://... the state lives in that PostgreSQL database
instead (migrated at start, under a lock, so replicas may start together); any
number of servers may share it. The board token file stays in <data-dir>.
For a primary with a synchronous standby name both hosts,
postgres://db1,db2/clasp?target_session_attrs=read-write: after a failover
the server reconnects to the promoted one by itself (503 unavailable in
between; see docs/postgres-failover.md). Started while the database is
unreachable, serve listens at once (/readyz 503) and retries with backoff
for up to --db-wait before exiting. Every request but the event stream has a
server-side deadline, --request-deadline (503 unavailable when cut; on
PostgreSQL also every statement's statement_timeout).

Server-managed agents: nothing a run's command starts outlives the run, also
what leaves its process group (setsid, a double fork, nohup): the run's
watcher ends its whole process tree when the command exits or the run is
stopped. As root, --agent-uid-range FIRST-LAST runs each agent as a uid of
its own (like systemd's DynamicUser), so agents cannot read each other's run
tokens in /proc/<pid>/environ nor signal each other, and a process a killed
watcher left behind is killed by uid. --agent-user NAME runs all agents as
one shared user instead. Without either, agents run as the server's user.

Environment: ` + EnvDataDir + `, ` + EnvListen + ` and ` + EnvDatabaseURL + ` set --data-dir, --listen and
--database-url.`,
		Example: `  clasp serve
  clasp serve --listen 127.0.0.1:0 --data-dir /tmp/clasp --lease-ttl 30s
  clasp serve --local-trusted --log-level debug
  sudo clasp serve --agent-uid-range 200000-265535 --data-dir /var/lib/clasp`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			// Zero means "default" only for library callers of Serve; on
			// the command line a zero or negative duration is a mistake.
			if cfg.LeaseTTL <= 0 || cfg.SweepInterval <= 0 {
				return usageErr(fmt.Errorf("--lease-ttl and --sweep-interval must be positive durations such as 60s or 10s"))
			}
			if cfg.DBMaxConns < 0 || cfg.DBMaxConns > 10000 {
				return usageErr(fmt.Errorf("--db-max-conns must be 0 (the default) or a number of connections from 1 to 10000"))
			}
			if !f.Changed("data-dir") {
				cfg.DataDir = firstNonEmpty(a.getenv(EnvDataDir), cfg.DataDir)
			}
			if !f.Changed("listen") {
				cfg.Listen = firstNonEmpty(a.getenv(EnvListen), cfg.Listen)
			}
			if !f.Changed("database-url") {
				cfg.DatabaseURL = a.getenv(EnvDatabaseURL)
			}
			if cfg.DatabaseURL == "" && f.Changed("db-max-conns") {
				return usageErr(fmt.Errorf("--db-max-conns sizes the PostgreSQL pool; it needs --database-url (the embedded SQLite store has one writer connection)"))
			}
			switch {
			case cfg.DBWait < 0:
				return usageErr(fmt.Errorf("--db-wait must be 0 (no waiting) or a positive duration such as 2m"))
			case cfg.DBWait == 0:
				cfg.DBWait = -1 // on the command line 0 means no waiting, not the default
			}
			switch {
			case cfg.RequestDeadline < 0:
				return usageErr(fmt.Errorf("--request-deadline must be 0 (none) or a positive duration such as 30s"))
			case cfg.RequestDeadline == 0:
				cfg.RequestDeadline = -1
			}
			if cfg.WebhookTimeout <= 0 || cfg.WebhookRetryBase <= 0 {
				return usageErr(fmt.Errorf("--webhook-timeout and --webhook-retry-base must be positive durations such as 10s"))
			}
			if cfg.BodyTimeout < 0 || f.Changed("body-timeout") && cfg.BodyTimeout == 0 {
				return usageErr(fmt.Errorf("--body-timeout must be a positive duration such as 30s: a request body that never arrives would otherwise hold its connection forever"))
			}
			log, err := newLogger(a.stderr, logLevel)
			if err != nil {
				return err
			}
			cfg.Logger = log
			cfg.Stdout = a.stdout
			if !f.Changed("ca-cert") {
				cfg.AgentCACert = a.getenv(EnvCACert)
			}
			return Serve(cmd.Context(), cfg, nil)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.DataDir, "data-dir", DefaultDataDir, "directory of the database and the board token file (env "+EnvDataDir+")")
	f.StringVar(&cfg.Listen, "listen", DefaultListen, "address to listen on, host:port (env "+EnvListen+")")
	f.StringVar(&cfg.DatabaseURL, "database-url", "", "PostgreSQL URL (postgres://...): keep the state there instead of <data-dir>/clasp.db; replicas may share it (env "+EnvDatabaseURL+")")
	f.IntVar(&cfg.DBMaxConns, "db-max-conns", 0, fmt.Sprintf("PostgreSQL only: most database connections this server opens, i.e. statements in flight; 0 takes the URL's pool_max_conns, else %d. Size it to the concurrent agents of the fleet, keeping (replicas x (this + 1)) under the database's max_connections", postgres.DefaultMaxConns))
	f.DurationVar(&cfg.DBWait, "db-wait", DefaultDBWait, "PostgreSQL only: how long to keep trying at start while the database is unreachable (retrying with backoff up to 5 s, /readyz 503 meanwhile) before exiting; 0: exit at the first failure")
	f.DurationVar(&cfg.RequestDeadline, "request-deadline", DefaultRequestDeadline, "longest an API request (but the event stream) may run: one cut at it answers 503 unavailable; on PostgreSQL also every statement's statement_timeout; 0: no deadline")
	f.DurationVar(&cfg.BodyTimeout, "body-timeout", httpapi.DefaultBodyReadTimeout, "longest a request's body may take to arrive, on every route (the API, /mcp, the board's forms): 408 request_timeout after it, and the connection closes")
	f.DurationVar(&cfg.LeaseTTL, "lease-ttl", DefaultLeaseTTL, "lease a run gets from each sign of life: a run that stays silent this long is lost (writes are at most one per min(1s, TTL/3) per run, so a lease may run up to that much longer)")
	f.DurationVar(&cfg.SweepInterval, "sweep-interval", DefaultSweepInterval, "time between sweeper passes")
	f.BoolVar(&cfg.LocalTrusted, "local-trusted", false, "requests without a token are the board (loopback --listen only)")
	f.BoolVar(&cfg.BoardReadOnly, "board-read-only", false, "the web board at / shows everything and changes nothing (it hides and refuses every action)")
	f.BoolVar(&cfg.RequireRunToken, "require-run-token", false, "checkout, release, issue PATCH, run heartbeat and run finish by agents accept only run tokens")
	f.StringVar(&cfg.Sync, "sync", "full", "SQLite durability: full (an acknowledged write survives power loss) or normal (an acknowledged write may be lost on power loss, not on a process crash)")
	f.StringVar(&cfg.Pprof, "pprof", "", "serve Go's profiler (/debug/pprof/) on this loopback host:port, a listener of its own (e.g. 127.0.0.1:6060), to admin operator tokens only (Authorization: Bearer, e.g. the board token)")
	addNetFlags(f, &cfg.Net)
	f.StringVar(&cfg.AgentCACert, "ca-cert", "", "with TLS: PEM file of the CA certificates server-managed agents are told to trust for this server (CLASP_CA_CERT, NODE_EXTRA_CA_CERTS); default $"+EnvCACert+", else the --tls-cert file")
	f.StringVar(&cfg.AgentUser, "agent-user", "", "run every server-managed agent process as this one user (name or uid; the server must run as root); the data directory, database and board token are then unreadable to them, but agents can read each other's environment (run tokens) and signal each other: prefer --agent-uid-range")
	f.StringVar(&cfg.AgentUIDRange, "agent-uid-range", "", "run each server-managed agent as a uid (and gid) of its own from the range `FIRST-LAST` (such as 200000-265535), allocated at its first run and kept (recorded in the database), with no supplementary groups and a home <data-dir>/homes/<agentId> (0700); agents can then neither read each other's environment or files nor signal each other, and the server kills what a run leaves behind by uid. The server must run as root; not with --agent-user; uids of system accounts are skipped")
	f.BoolVar(&cfg.WebhookAllowPrivate, "webhook-allow-private", false, "let webhook subscriptions reach loopback, private and link-local addresses (on-premises receivers, tests); without it such targets are refused at creation and at every connection")
	f.DurationVar(&cfg.WebhookTimeout, "webhook-timeout", webhook.DefaultTimeout, "longest one webhook delivery attempt may take; a slower receiver's attempt fails and is retried")
	f.DurationVar(&cfg.WebhookRetryBase, "webhook-retry-base", webhook.DefaultRetryBase, "delay after a webhook delivery's first failed attempt, doubled at each later one (up to 1h, less up to half at random), for 24h")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error (logs go to stderr)")
	return cmd
}

func (a *app) newMigrateCmd() *cobra.Command {
	var dataDir, databaseURL string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade the database and print its schema version",
		Long: `Apply the pending migrations to <data-dir>/clasp.db (creating it if needed) and
print the schema version; with --database-url (or ` + EnvDatabaseURL + `), to that
PostgreSQL database. 'clasp serve' does the same at start; use migrate to
upgrade ahead of a deployment.`,
		Example: `  clasp migrate --data-dir /var/lib/clasp
  clasp migrate --database-url postgres://clasp@db.internal/clasp`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("data-dir") {
				dataDir = firstNonEmpty(a.getenv(EnvDataDir), dataDir)
			}
			if !cmd.Flags().Changed("database-url") {
				databaseURL = a.getenv(EnvDatabaseURL)
			}
			ctx := cmd.Context()
			path := filepath.Join(dataDir, DBFileName)
			if databaseURL == "" {
				unlock, err := useDataDir(dataDir)
				if err != nil {
					return err
				}
				defer unlock()
			}
			var st versionedStore
			st, err := openStore(ctx, databaseURL, path, nil, "")
			if err != nil {
				return err
			}
			if databaseURL != "" {
				path = redactURL(databaseURL)
			}
			defer st.Close()
			v, err := st.SchemaVersion(ctx)
			if err != nil {
				return fmt.Errorf("read schema version: %w", err)
			}
			fmt.Fprintf(a.stdout, "%s: schema version %d\n", path, v)
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", DefaultDataDir, "directory of the database (env "+EnvDataDir+")")
	cmd.Flags().StringVar(&databaseURL, "database-url", "", "PostgreSQL URL to migrate instead of <data-dir>/clasp.db (env "+EnvDatabaseURL+")")
	return cmd
}

// versionedStore is what migrate uses of the store it opens.
type versionedStore interface {
	SchemaVersion(ctx context.Context) (int64, error)
	Close() error
}

// migratedStore is what serve and migrate open: a store with the
// heartbeat scheduler's part (both dialects have it) that reports its
// schema version.
type migratedStore interface {
	store.HeartbeatStore
	SchemaVersion(ctx context.Context) (int64, error)
}

// openStore opens (creating and migrating) the PostgreSQL database at
// databaseURL when it is set, else the SQLite file at path with the given
// synchronous mode ("" for the default).
func openStore(ctx context.Context, databaseURL, path string, log *slog.Logger, sync string) (migratedStore, error) {
	return openStoreConns(ctx, databaseURL, path, log, sync, 0)
}

// openStoreConns is openStore with a PostgreSQL pool of maxConns
// connections (0: see postgres.Options.MaxConns).
func openStoreConns(ctx context.Context, databaseURL, path string, log *slog.Logger, sync string, maxConns int) (migratedStore, error) {
	return openStoreOpts(ctx, databaseURL, path, log, sync, postgres.Options{MaxConns: int32(maxConns)}) // #nosec G115 -- --db-max-conns is checked to be 0..10000 before this
}

// openStoreOpts is openStore with the PostgreSQL options pg (its Logger is log).
func openStoreOpts(ctx context.Context, databaseURL, path string, log *slog.Logger, sync string, pg postgres.Options) (migratedStore, error) {
	if databaseURL != "" {
		pg.Logger = log
		d, err := postgres.Open(ctx, databaseURL, pg)
		if err != nil {
			return nil, err
		}
		return store.New(d), nil
	}
	d, err := sqlite.Open(ctx, path, sqlite.Options{Logger: log, Synchronous: strings.ToUpper(sync)})
	if err != nil {
		return nil, err
	}
	return store.New(d), nil
}

// redactURL is a database URL fit to print: without its password, or a
// placeholder when it is not a URL (a key=value DSN may hold one).
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Scheme == "" {
		return "PostgreSQL (" + EnvDatabaseURL + ")"
	}
	return p.Redacted()
}

// serveInBackground runs Serve(cfg) in this process until the returned stop
// is called (the swarm's and verify's embedded server). It returns once the
// server listens, with its URL and board token; or Serve's error if it
// stopped before that; or ctx's error (after Serve returned). stop ends the
// server and returns Serve's error, or ctx's if ctx ends first.
func serveInBackground(ctx context.Context, cfg ServeConfig) (ServeInfo, func(context.Context) error, error) {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ready := make(chan ServeInfo, 1)
	served := make(chan error, 1)
	go func() { served <- Serve(sctx, cfg, ready) }()
	select {
	case info := <-ready:
		stop := func(ctx context.Context) error {
			cancel()
			select {
			case err := <-served:
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return info, stop, nil
	case err := <-served:
		cancel()
		return ServeInfo{}, nil, err
	case <-ctx.Done():
		cancel()
		<-served
		return ServeInfo{}, nil, ctx.Err()
	}
}
