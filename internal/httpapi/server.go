// Package httpapi is the HTTP API of the clasp server (docs/api.md,
// RULES.md): the routes under /api, their authentication (board token, agent API
// keys, run tokens, local-trusted loopback mode), strict JSON decoding, the
// JSON error bodies, idempotent creation, and /healthz, /readyz and /metrics.
//
// It talks to the database only through store.Store, and every lock rule is
// the store's: handlers validate input, check who may call, then make one
// store call. Only internal/cli imports this package.
package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/metrics"
	"github.com/clasp-dev/clasp/internal/store"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultLeaseTTL is the lease a run gets from each sign of life when
// Config.LeaseTTL is zero (RULES.md, Leases).
const DefaultLeaseTTL = 60 * time.Second

// MinRenewInterval is how often, at most, a request that names a run writes
// the renewal of its lease (the heartbeat endpoint always writes). With a
// lease TTL under 3 s the window shrinks to a third of the TTL, so that
// ordinary requests still keep a busy run alive.
const MinRenewInterval = time.Second

// Config configures a Server. Store is required; every other field has a default.
type Config struct {
	// Store holds all state.
	Store store.Store
	// Logger receives request logs (debug) and internal errors (error).
	// Default: slog.Default().
	Logger *slog.Logger
	// LeaseTTL is the lease a run gets from each sign of life. Default 60 s.
	LeaseTTL time.Duration
	// LocalTrusted makes a request without Authorization the board, when its
	// Host is a loopback name, and turns on cross-origin protection
	// (RULES.md, Actors and credentials). The caller must bind a loopback address only.
	LocalTrusted bool
	// RequireRunToken makes checkout, release, issue PATCH, and a run's
	// heartbeat and finish, by agents accept only run tokens, not an agent
	// key plus a run header (RULES.md, Actors and credentials). The board may still finish
	// any run.
	RequireRunToken bool
	// Registry is where /metrics gathers from. Default: a new registry with
	// the Go and process collectors.
	Registry *prometheus.Registry
	// Metrics is shared with the sweeper. Default: metrics.New(Registry).
	Metrics *metrics.Metrics
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// MaxBodyBytes caps request bodies (413 above it). Default 1 MiB.
	MaxBodyBytes int64
	// BodyReadTimeout bounds the reading of one request's body, from when
	// the handler starts reading it (408 request_timeout after it). It is
	// a per-request read deadline, so the http.Server needs no ReadTimeout,
	// which would also cut the event stream. Default 30 s.
	BodyReadTimeout time.Duration
	// WebhookAllowPrivate lets webhook subscriptions name private,
	// loopback and link-local IP addresses (clasp serve
	// --webhook-allow-private); without it such a literal address is 400
	// at creation, and every delivery is checked again at dial time
	// (RULES.md W5).
	WebhookAllowPrivate bool
	// Scheduler is the heartbeat scheduler of server-managed agents:
	// wakeups nudge it, run cancels stop its processes. Nil: wakes are
	// only recorded, and cancels end runs in the store.
	Scheduler Scheduler
	// Webhooks, when set, is the webhook dispatcher, nudged after a
	// subscription is created, changed or a delivery redelivered, so that
	// it looks for deliveries at once; nil leaves it to its own wake-ups.
	Webhooks Nudger
	// Dependencies, when set, is nudged after a write that may make an
	// issue ready or a parent's children complete (the sweeper's
	// dependency-wake pass); nil leaves it to the next regular pass.
	Dependencies Dependencies
	// RunLogDir holds the run logs of server-managed runs (<runId>.log, see
	// heartbeat.LogPath), served by GET /api/runs/{id}/log. "": no logs (404).
	RunLogDir string
	// Limits are the rate limits and caps (see Limits); zero fields take
	// their defaults.
	Limits Limits
	// CredentialCacheTTL is how long a verified agent key, and the live
	// run a request named with it, is believed without a store read
	// (credCache). Default DefaultCredentialCacheTTL; negative: no cache,
	// every request reads the store.
	CredentialCacheTTL time.Duration
	// RequestDeadline, when positive, bounds every /api request but the
	// event stream: its context ends this long after the endpoint started
	// (authentication included), the store gives up, and a request cut so
	// answers 503 unavailable with details.deadlineExceeded true (it may or
	// may not have taken effect). With the PostgreSQL store's statement
	// timeout it bounds when a request the server gave up on is over on the
	// database too. Zero: no deadline.
	RequestDeadline time.Duration
	// SessionIdle ends a board session after this long without a request.
	// Default DefaultSessionIdle.
	SessionIdle time.Duration
	// SessionMaxAge ends a board session this long after it was opened,
	// used or not. Default DefaultSessionMaxAge.
	SessionMaxAge time.Duration
}

// Scheduler is what the API needs of the heartbeat scheduler.
type Scheduler interface {
	// Nudge asks for a scheduler pass at once; it never blocks.
	Nudge()
	// Cancel stops run runID's process (SIGTERM, then SIGKILL) and ends the
	// run cancelled; false when no process of this scheduler runs it.
	Cancel(runID string) bool
}

// DefaultBodyReadTimeout is Config.BodyReadTimeout's default.
const DefaultBodyReadTimeout = 30 * time.Second

// Server serves the clasp HTTP API. Build it with New; it is safe for
// concurrent use.
type Server struct {
	cfg      Config
	st       store.Store
	log      *slog.Logger
	m        *metrics.Metrics
	now      func() time.Time
	minRenew time.Duration // min(MinRenewInterval, LeaseTTL/3)
	// lease is what each lease write grants: LeaseTTL + minRenew. A
	// request less than minRenew after the last write renews nothing
	// (touch), so a write must cover a full LeaseTTL after any request it
	// skips: the lease then never ends earlier than LeaseTTL after the
	// last sign of life (RULES.md, Leases), and a dead run is found at most
	// minRenew later. (Writes granting LeaseTTL alone would let a run be
	// swept up to minRenew early.)
	lease time.Duration
	// sessionIdle and sessionMaxAge end board sessions (Config).
	sessionIdle, sessionMaxAge time.Duration
	mux                        *http.ServeMux
	// patterns are the mux patterns of the /api endpoints registered with
	// handle, in order (the OpenAPI document must list each).
	patterns []string
	access   map[string]access // who may call each pattern of patterns
	handler  http.Handler
	stopping atomic.Bool
	stopOnce sync.Once
	stopped  chan struct{} // closed by BeginShutdown: event streams end

	// templates caches each company's branch template and issue prefix
	// for the workspaces of grants (grantTemplate).
	templates templateCache

	limits   Limits
	byAddr   *buckets // Limits.AddressRate per client address
	byCred   *buckets // Limits.CredentialRate per credential
	comments *buckets // Limits.CommentsPerAgentMinute per agent
	creates  *buckets // Limits.CreatesPerAgentMinute per agent
	streams  *streamSlots
	creds    *credCache // nil: no credential cache
	// durations holds the latency histogram's observer per matched
	// route, method and status (a bounded set), looked up once each.
	durations sync.Map // durationKey → prometheus.Observer
}

// durationKey names one series of the latency histogram.
type durationKey struct {
	method, route string
	status        int
}

// otherMethod is the method label of every request whose method is not
// one of the standard ones: any client can send any method name, and each
// distinct label value would be a new series kept for the process's life.
const otherMethod = "OTHER"

// observeDuration records d in the latency histogram's series for the
// request. The label space is bounded: a method outside the standard ones
// is labelled OTHER, and a request no route matched is labelled with the
// route "unmatched" (routeLabel). A request no route matched is not cached.
func (s *Server) observeDuration(method, pattern, route string, status int, d time.Duration) {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions,
		http.MethodConnect, http.MethodTrace:
	default:
		method, pattern = otherMethod, ""
	}
	if pattern == "" {
		s.m.HTTPRequestDuration.WithLabelValues(method, route, strconv.Itoa(status)).Observe(d.Seconds())
		return
	}
	k := durationKey{method, route, status}
	o, ok := s.durations.Load(k)
	if !ok {
		o, _ = s.durations.LoadOrStore(k, s.m.HTTPRequestDuration.WithLabelValues(method, route, strconv.Itoa(status)))
	}
	o.(prometheus.Observer).Observe(d.Seconds())
}

// New returns a Server for cfg. It panics if cfg.Store is nil.
func New(cfg Config) *Server {
	if cfg.Store == nil {
		panic("httpapi.New: Config.Store is nil")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
		cfg.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New(cfg.Registry)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.BodyReadTimeout <= 0 {
		cfg.BodyReadTimeout = DefaultBodyReadTimeout
	}
	s := &Server{cfg: cfg, st: cfg.Store, log: cfg.Logger, m: cfg.Metrics, now: cfg.Now, mux: http.NewServeMux(), stopped: make(chan struct{}),
		minRenew: min(MinRenewInterval, cfg.LeaseTTL/3)}
	s.lease = cfg.LeaseTTL + s.minRenew
	s.sessionIdle, s.sessionMaxAge = cmp.Or(cfg.SessionIdle, DefaultSessionIdle), cmp.Or(cfg.SessionMaxAge, DefaultSessionMaxAge)
	if cfg.CredentialCacheTTL == 0 {
		cfg.CredentialCacheTTL = DefaultCredentialCacheTTL
	}
	s.creds = newCredCache(cfg.CredentialCacheTTL, cfg.Now)
	s.limits = cfg.Limits.withDefaults()
	s.byAddr = newBuckets(s.limits.AddressRate, s.limits.AddressBurst)
	s.byCred = newBuckets(s.limits.CredentialRate, s.limits.CredentialBurst)
	s.comments = newBuckets(float64(s.limits.CommentsPerAgentMinute)/60, s.limits.CommentsPerAgentMinute)
	s.creates = newBuckets(float64(s.limits.CreatesPerAgentMinute)/60, s.limits.CreatesPerAgentMinute)
	s.streams = &streamSlots{perCred: s.limits.StreamsPerAgent, total: s.limits.Streams, open: map[string]int{}}
	s.access = map[string]access{}
	s.routes()
	var h http.Handler = http.HandlerFunc(s.serveMux)
	if cfg.LocalTrusted {
		// Refuse cross-origin browser writes, so that a web page cannot
		// drive the board API through the user's browser (RULES.md, Actors and credentials).
		cop := http.NewCrossOriginProtection()
		cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.writeError(w, r, clasp.Errorf(clasp.CodeForbidden, "Cross-origin requests that change state are refused."))
		}))
		h = cop.Handler(h)
	}
	s.handler = s.observe(h)
	return s
}

// Handler returns the server's root handler: /api/..., /healthz, /readyz
// and /metrics.
func (s *Server) Handler() http.Handler { return s.handler }

// BeginShutdown makes /readyz answer 503 from now on, so load balancers stop
// sending traffic while in-flight requests finish (call it before
// http.Server.Shutdown).
func (s *Server) BeginShutdown() {
	s.stopping.Store(true)
	s.stopOnce.Do(func() { close(s.stopped) })
}

// serveMux dispatches to the mux, answering unknown paths with 404 and
// known paths with a wrong method with 405 (plus Allow), as JSON.
func (s *Server) serveMux(w http.ResponseWriter, r *http.Request) {
	if clean := cleanPath(r.URL.Path); clean != r.URL.Path {
		// The mux would redirect to the clean path (307, empty body), and
		// clients that follow it send a POST again: an API client should
		// fix its path instead.
		closeIfBodyUnread(w, r, nil)
		s.writeError(w, r, clasp.Errorf(clasp.CodeNotFound, "There is no endpoint %s %s; the path is not in its clean form (%s).", r.Method, r.URL.Path, clean).
			WithDetails("cleanPath", clean))
		return
	}
	h, pattern := s.mux.Handler(r)
	if pattern != "" {
		s.mux.ServeHTTP(w, r)
		return
	}
	// No pattern: the mux would answer 404, 405 or a redirect. Let it
	// answer into a recorder and translate the first two into JSON.
	rec := &headerRecorder{header: http.Header{}}
	h.ServeHTTP(rec, r)
	closeIfBodyUnread(w, r, nil)
	switch rec.status {
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", rec.header.Get("Allow"))
		s.writeError(w, r, clasp.Errorf(clasp.CodeMethodNotAllowed, "Method %s is not allowed on %s.", r.Method, r.URL.Path).
			WithDetails("allow", rec.header.Get("Allow")))
	case http.StatusNotFound, 0:
		s.writeError(w, r, clasp.Errorf(clasp.CodeNotFound, "There is no endpoint %s %s.", r.Method, r.URL.Path))
	default:
		// A redirect to the cleaned path (a path with "//", "/./" or
		// "/../"): an API client should fix its path, and a redirected
		// POST would be sent again; answer 404 naming the clean path.
		loc := rec.header.Get("Location")
		s.writeError(w, r, clasp.Errorf(clasp.CodeNotFound, "There is no endpoint %s %s; the path is not in its clean form (%s).", r.Method, r.URL.Path, loc).
			WithDetails("cleanPath", loc))
	}
}

// cleanPath is p without empty, "." and ".." segments, keeping a trailing
// slash (the form ServeMux redirects to).
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}

// headerRecorder records the status and headers a handler writes and drops its body.
type headerRecorder struct {
	header http.Header
	status int
}

func (h *headerRecorder) Header() http.Header { return h.header }
func (h *headerRecorder) Write(b []byte) (int, error) {
	if h.status == 0 {
		h.status = http.StatusOK
	}
	return len(b), nil
}
func (h *headerRecorder) WriteHeader(code int) {
	if h.status == 0 {
		h.status = code
	}
}

// statusWriter remembers the status written through it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// observe wraps next with the steps every request takes, before any
// other: its request id (a valid X-Request-Id, else a new one; echoed in
// the answer's X-Request-Id, put in the request's context for error
// bodies, logs and activity rows), X-Content-Type-Options: nosniff, the
// header size cap (431 headers_too_large as JSON above MaxHeaderBytes), the
// per-address rate limit (429 rate_limited with Retry-After), panic
// recovery, the request log (debug) and the latency histogram, labelled
// with the route pattern (never the raw path).
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rid := requestIDOf(r)
		r = r.WithContext(context.WithValue(r.Context(), requestIDKey, rid))
		h := w.Header()
		h[RequestIDHeader] = []string{rid} // both keys are in canonical form
		h["X-Content-Type-Options"] = hdrNosniff
		sw := &statusWriter{ResponseWriter: w}
		addr := s.clientAddr(r)
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "request_id", rid,
					"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				if sw.status == 0 {
					writeJSON(sw, http.StatusInternalServerError, withRequestID(internalBody, rid))
				}
			}
			status := sw.status
			if status == 0 {
				status = http.StatusOK
			}
			route := routeLabel(r.Pattern)
			d := time.Since(start)
			s.observeDuration(r.Method, r.Pattern, route, status, d)
			if s.log.Enabled(r.Context(), slog.LevelDebug) { // spares building the attributes when off
				s.log.Debug("request", "method", r.Method, "route", route, "status", status, "duration", d,
					"request_id", rid, "client", addr)
			}
		}()
		if headerBytes(r) > MaxHeaderBytes {
			w.Header().Set("Connection", "close")
			s.writeError(sw, r, clasp.Errorf(clasp.CodeHeaderTooLarge, "The request header is larger than %d bytes.", MaxHeaderBytes).
				WithDetails("limit", MaxHeaderBytes))
			return
		}
		if strings.HasPrefix(r.URL.Path, "/api/") && r.Context().Value(addrCountedKey{}) == nil {
			if st := s.byAddr.take(addr, time.Now()); !st.ok {
				st.setHeaders(h)
				closeIfBodyUnread(sw, r, nil)
				s.writeError(sw, r, rateLimited("client address", st))
				return
			}
		}
		next.ServeHTTP(sw, r)
	})
}

// addrCountedKey marks, in a request's context, that Guard has counted the
// request against its client's address: the API calls that a guarded
// handler makes in process with that context are not counted again. A
// remote client cannot set a context value.
type addrCountedKey struct{}

// Guard wraps next, a handler served beside the API on the same listener
// (the MCP endpoint), in the limits every API request meets: the header
// cap (431 headers_too_large) and the per-address rate limit (429
// rate_limited with Retry-After), keyed by the client's address as the API
// sees it (the peer's, or a trusted proxy's X-Forwarded-For), both
// answered as the API's JSON error with the request's id. The request's id
// (a valid X-Request-Id, else a new one) is set in its X-Request-Id header
// before next runs, so next answers with the same one. A request that
// passes carries in its context the mark that it was counted: calls next
// makes to this API in process with that context take nothing more from
// the client's allowance.
func (s *Server) Guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rid := requestIDOf(r)
		r.Header.Set(RequestIDHeader, rid)
		r = r.WithContext(context.WithValue(r.Context(), requestIDKey, rid))
		refuse := func(err error) {
			w.Header().Set(RequestIDHeader, rid)
			w.Header().Set("X-Content-Type-Options", "nosniff")
			s.writeError(w, r, err)
		}
		if headerBytes(r) > MaxHeaderBytes {
			w.Header().Set("Connection", "close")
			refuse(clasp.Errorf(clasp.CodeHeaderTooLarge, "The request header is larger than %d bytes.", MaxHeaderBytes).
				WithDetails("limit", MaxHeaderBytes))
			return
		}
		if st := s.byAddr.take(s.clientAddr(r), time.Now()); !st.ok {
			st.setHeaders(w.Header())
			closeIfBodyUnread(w, r, nil)
			refuse(rateLimited("client address", st))
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), addrCountedKey{}, true)))
	})
}

// BodyDeadline wraps next, a handler served beside the API on the same
// listener (the MCP endpoint, the board's forms), in the API's body rules:
// a request that carries a body must deliver all of it within
// Config.BodyReadTimeout of real time (408 request_timeout, and the
// connection closes) and within Config.MaxBodyBytes (413 body_too_large),
// both as the API's JSON error. next then reads the body from memory, so
// that a client sending one byte at a time cannot hold a handler that
// reads without a deadline. Requests under /api/ pass unchanged: the API
// reads its bodies by the same rules itself.
func (s *Server) BodyDeadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") || r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		body, err := s.readRequestBody(w, r)
		if err != nil {
			if RequestIDFrom(r.Context()) == "" {
				rid := requestIDOf(r)
				r = r.WithContext(context.WithValue(r.Context(), requestIDKey, rid))
				w.Header().Set(RequestIDHeader, rid)
			}
			w.Header().Set("X-Content-Type-Options", "nosniff")
			s.writeError(w, r, err)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

// routeLabel returns the path part of a mux pattern ("POST /api/x/{id}" →
// "/api/x/{id}"), or "unmatched".
func routeLabel(pattern string) string {
	if pattern == "" {
		return "unmatched"
	}
	if _, p, ok := strings.Cut(pattern, " "); ok {
		return p
	}
	return pattern
}

// handleHealthz answers 200 while the process serves (liveness), with the
// server's build: {"status":"ok","version":"v1.2.3","commit":"<sha>"}
// (commit is "" when the binary does not know it).
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	b := clasp.Build()
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "version": b.Version, "commit": b.Commit})
}

// handleReadyz answers 200 when the database answers a ping within 2 s, and
// 503 unavailable when it does not or the server is shutting down.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	if s.stopping.Load() {
		s.writeError(w, r, clasp.Errorf(clasp.CodeUnavailable, "The server is shutting down."))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.st.Ping(ctx); err != nil {
		s.log.Warn("readiness ping failed", "err", err)
		s.writeError(w, r, clasp.Errorf(clasp.CodeUnavailable, "The database does not answer."))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// metricsHandler serves the registry in the Prometheus text format.
func (s *Server) metricsHandler() http.Handler {
	return promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelError)})
}
