package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// access says who may call an endpoint.
type access int

const (
	boardOnly access = iota + 1 // agents get 403 forbidden
	agentOnly                   // the board gets 403 forbidden
	anyone                      // the board or an agent
	adminOnly                   // the board with an operator token of role admin (others: 403)
	gateOnly                    // a gate token (RULES.md G4); every other route refuses one (403)
)

// runRule says how an endpoint treats the run an agent names.
type runRule int

const (
	// runOptional: a named run is checked and renewed; none is fine.
	//lint:ignore U1000 the zero value of endpoint.run, named for the reader: endpoints that leave run unset get it
	runOptional runRule = iota
	// runRequired: an agent must name a live run (401 run_id_required).
	runRequired
	// runInPath: the run is the path's {id} (heartbeat, finish); a run
	// header or run token must name the same run.
	runInPath
)

// endpoint is one route of the API with its rules.
type endpoint struct {
	pattern string // Go 1.22 pattern, "POST /api/issues/{id}/checkout"
	access  access
	run     runRule
	// tokenOnly: with Config.RequireRunToken, agents must authenticate with
	// a run token (RULES.md, Actors and credentials).
	tokenOnly bool
	// forceTouch: renew the run's lease even if renewed less than
	// MinRenewInterval ago (the heartbeat).
	forceTouch bool
	// idempotent: honours the Idempotency-Key header (creating requests,
	// and PATCH of an issue): prepare fills call.idem, which serve passes
	// to the store's create (or update).
	idempotent bool
	// anyRole: a write that an operator token of role viewer may make too
	// (signing in and out of the board).
	anyRole bool
	// unscoped: only an operator of every company may call it (creating a
	// company).
	unscoped bool
	// serve does the work and returns the status and value of a success.
	serve func(ctx context.Context, c *call) (int, any, error)
	// params are the pattern's path wildcards and the ids they take, set
	// by Server.handle (pathParams).
	params []pathID
}

// call is one request being served.
type call struct {
	s     *Server
	ep    *endpoint
	w     http.ResponseWriter
	r     *http.Request
	who   principal
	runID string // the run the call names (header, run token or path), "" if none
	// runHeader is the header that named the run (X-Clasp-Run-Id or
	// X-Paperclip-Run-Id), "" when none did.
	runHeader string
	run       *clasp.Run // the named run, once touch checked it
	body      []byte     // the raw body, nil for none
	// idem is the request's Idempotency-Key on an idempotent endpoint, nil
	// without one. The store sets idem.Replayed when it answered an earlier
	// creation; serveEndpoint then adds Idempotent-Replayed: true.
	idem *store.IdempotencyParams
}

// validator is implemented by request bodies with rules beyond JSON types.
// validate returns a 400 invalid_request naming the field, or 422
// precondition_failed for values that are well-formed but never allowed.
type validator interface {
	validate() error
}

// withBody returns a serve function that decodes the body into a T
// (decodeJSON's strict rules; an empty body counts as {}), validates it,
// checks and renews the named run, and then calls fn. Nothing is written
// before the body is known to be good.
func withBody[T any](fn func(ctx context.Context, c *call, in *T) (int, any, error)) func(context.Context, *call) (int, any, error) {
	return func(ctx context.Context, c *call) (int, any, error) {
		var in T
		data := c.body
		if len(bytes.TrimSpace(data)) == 0 {
			data = []byte("{}")
		}
		if err := decodeJSONBytes(data, &in); err != nil {
			return 0, nil, err
		}
		if v, ok := any(&in).(validator); ok {
			if err := v.validate(); err != nil {
				return 0, nil, err
			}
		}
		if err := c.touch(ctx); err != nil {
			return 0, nil, err
		}
		return fn(ctx, c, &in)
	}
}

// noBody returns a serve function for requests without a body (GET,
// DELETE, an action such as an archive): a write's body, when it sent one,
// must be the empty object {} (decodeJSON's strict rules: 400
// invalid_request for malformed JSON or naming an unknown field, nothing
// done); then it checks and renews the named run and calls fn.
func noBody(fn func(ctx context.Context, c *call) (int, any, error)) func(context.Context, *call) (int, any, error) {
	return func(ctx context.Context, c *call) (int, any, error) {
		if m := c.r.Method; m != http.MethodGet && m != http.MethodHead && len(bytes.TrimSpace(c.body)) > 0 {
			var none struct{}
			if err := decodeJSONBytes(c.body, &none); err != nil {
				return 0, nil, err
			}
		}
		if err := c.touch(ctx); err != nil {
			return 0, nil, err
		}
		return fn(ctx, c)
	}
}

// handle registers ep on the mux and records its pattern in s.patterns.
func (s *Server) handle(ep endpoint) {
	ep.params = pathParams(ep.pattern)
	s.patterns = append(s.patterns, ep.pattern)
	s.access[ep.pattern] = ep.access
	s.mux.HandleFunc(ep.pattern, func(w http.ResponseWriter, r *http.Request) { s.serveEndpoint(w, r, &ep) })
}

// serveEndpoint runs the common steps of every /api endpoint, in order:
// authenticate (401/403), check access (403), check the ids in the path
// (400, checkPathIDs), read the run header (400) and
// the run rules (401 run_id_required), check the company of a company route
// (403), read the capped body (413, or 408 if it does not arrive in time),
// read Idempotency-Key (400), then serve. A creation the store replayed for
// an Idempotency-Key answers with the header Idempotent-Replayed: true.
//
// With Config.RequestDeadline every endpoint but the event stream runs
// under that deadline (see deadlineErr).
func (s *Server) serveEndpoint(w http.ResponseWriter, r *http.Request, ep *endpoint) {
	orig := r // its context is the client's: writeError tells a client that left from the server's deadline by it
	if d := s.cfg.RequestDeadline; d > 0 && !ep.streams() {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		r = r.WithContext(ctx)
	}
	c, err := s.prepare(w, r, ep)
	if err != nil {
		err = s.deadlineErr(orig, r, err)
		closeIfBodyUnread(w, r, c)
		s.logDenied(r, ep, c, err)
		s.writeError(w, orig, err)
		return
	}
	status, v, err := ep.serve(r.Context(), c)
	if err != nil {
		err = s.deadlineErr(orig, r, err)
		s.logDenied(r, ep, c, err)
		s.writeError(w, orig, err)
		return
	}
	if v == streamed {
		return // the endpoint wrote its own response (event stream)
	}
	if err := s.withRelations(r.Context(), v); err != nil {
		err = s.deadlineErr(orig, r, err)
		s.writeError(w, orig, err)
		return
	}
	if c.idem != nil && c.idem.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, status, v)
}

// streams reports whether the endpoint answers a long-lived stream (the
// event stream), which no request deadline cuts.
func (ep *endpoint) streams() bool { return strings.HasSuffix(ep.pattern, "/events") }

// deadlineErr is err, unless the request's deadline (Config.RequestDeadline)
// passed while the client was still there and err is not an answer the
// store decided (a *clasp.Error other than 503 unavailable): then 503
// unavailable, with details.deadlineExceeded true, saying the request may
// or may not have taken effect. A 503 the store made of the cut is such a
// cut too: when the deadline cancels a PostgreSQL statement, the server
// answers 57014 (the code of a statement timeout as well) as often as the
// driver reports the context's error, whichever arrives first.
func (s *Server) deadlineErr(orig, r *http.Request, err error) error {
	if orig.Context().Err() != nil || !errors.Is(r.Context().Err(), context.DeadlineExceeded) {
		return err
	}
	if ce := clasp.AsError(err); ce != nil && ce.Code != clasp.CodeUnavailable {
		return err
	}
	s.log.Warn("request cut at the server's deadline", "method", r.Method, "path", r.URL.Path, "deadline", s.cfg.RequestDeadline,
		"request_id", RequestIDFrom(r.Context()), "err", err)
	return clasp.Errorf(clasp.CodeUnavailable, "The request did not finish within the server's deadline of %s; it may or may not have taken effect; retry shortly.", s.cfg.RequestDeadline).
		WithDetails("deadlineExceeded", true)
}

// logDenied logs a refused write (POST, PUT, PATCH, DELETE answered 4xx)
// at info, with the actor (or "anonymous" before authentication), the
// route, the error code and the request id, so that the audit of who was
// refused what does not need debug logs.
func (s *Server) logDenied(r *http.Request, ep *endpoint, c *call, err error) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead || !s.log.Enabled(r.Context(), slog.LevelInfo) {
		return // spares building the attributes when info is off
	}
	st, body, _ := statusOf(err)
	if st < 400 || st >= 500 {
		return
	}
	actor := "anonymous"
	if c != nil {
		actor = string(c.actor().Type) + ":" + c.actor().ID()
	}
	s.log.Info("write refused", "actor", actor, "method", r.Method, "route", routeLabel(ep.pattern), "status", st,
		"code", body.Code, "request_id", RequestIDFrom(r.Context()), "client", s.clientAddr(r))
}

// singleHeaders are the request headers a call may carry once: which of
// two credentials, runs, idempotency keys or body types would be meant is
// a guess, and guessing the first could act as the wrong caller.
var singleHeaders = []string{"Authorization", RunIDHeader, PaperclipRunIDHdr, "Idempotency-Key", "Content-Type"}

// checkSingleHeaders answers 400 invalid_request (details.field the
// header) when one of singleHeaders is given more than once.
func checkSingleHeaders(r *http.Request) error {
	for _, h := range singleHeaders {
		if n := len(r.Header.Values(h)); n > 1 {
			return clasp.InvalidField(h, "Header %s is given %d times; send it once.", h, n)
		}
	}
	return nil
}

// prepare authenticates and checks everything that needs no body. It
// returns the call as far as it got (nil before authentication succeeded)
// with any error, for the refusal's log.
func (s *Server) prepare(w http.ResponseWriter, r *http.Request, ep *endpoint) (*call, error) {
	if err := checkSingleHeaders(r); err != nil {
		return nil, err
	}
	who, err := s.authenticate(r, ep)
	if err != nil {
		return nil, err
	}
	c := &call{s: s, ep: ep, w: w, r: r, who: who}
	ck := who.hash // an agent key's hash, which credentialKey would compute again
	if ck == "" {
		ck = credentialKey(r)
	}
	if st := s.byCred.take(ck, time.Now()); !st.ok {
		st.setHeaders(w.Header())
		return c, rateLimited("credential", st)
	}
	if err := s.authorize(c); err != nil {
		return c, err
	}
	if r.URL.RawQuery != "" { // an empty query parses to an empty map
		vals, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			// r.URL.Query() drops a malformed pair silently: a bad cursor
			// would answer the first page again.
			return c, clasp.InvalidField("query", "The query string is malformed (%v); escape %% as %%25.", err)
		}
		if err := checkQueryText(vals); err != nil {
			return c, err
		}
	}
	if err := checkPathIDs(r, ep.params); err != nil {
		return c, err
	}
	c2, err := s.prepareCall(c)
	if c2 == nil {
		c2 = c
	}
	return c2, err
}

// prepareCall is the rest of prepare, once the caller is known and allowed.
func (s *Server) prepareCall(c *call) (*call, error) {
	r, w, who, ep := c.r, c.w, c.who, c.ep
	hdrRun, hdrName, err := runHeader(r)
	if err != nil {
		return nil, err
	}
	if who.board {
		if hdrRun != "" {
			return nil, clasp.InvalidField(hdrName, "The board never acts in a run; do not send %s.", hdrName)
		}
	} else {
		c.runID, c.runHeader = hdrRun, hdrName
		if who.tokenRun != nil {
			if hdrRun != "" && hdrRun != who.tokenRun.ID {
				return nil, clasp.Errorf(clasp.CodeForbidden, "The run token is bound to run %s, but %s names run %s.", who.tokenRun.ID, hdrName, hdrRun).
					WithDetails("field", hdrName)
			}
			c.runID = who.tokenRun.ID
		}
		if ep.run == runInPath {
			pathRun, _ := parseUUID(r.PathValue("id")) // checkPathIDs checked it
			switch {
			case c.runID == "":
				c.runID = pathRun
			case c.runID != pathRun && who.tokenRun != nil:
				return nil, clasp.Errorf(clasp.CodeForbidden, "The run token is bound to run %s, not run %s.", c.runID, pathRun)
			case c.runID != pathRun:
				return nil, clasp.InvalidField(hdrName, "%s names run %s, but the path names run %s.", hdrName, c.runID, pathRun)
			}
		}
		if ep.run == runRequired && c.runID == "" {
			// No run header was sent (one that was would have set
			// c.runID): name both, as a Paperclip client knows only its own.
			return nil, clasp.Errorf(clasp.CodeRunIDRequired, "This call needs the run it acts in: send the %s (or %s) header, or use a run token.", RunIDHeader, PaperclipRunIDHdr)
		}
		if ep.tokenOnly && s.cfg.RequireRunToken && who.tokenRun == nil {
			return nil, clasp.Errorf(clasp.CodeUnauthenticated, "This server accepts only run tokens for this call (--require-run-token); authenticate with the runToken of your run.")
		}
	}
	if err := c.companyRoute(); err != nil {
		return nil, err
	}
	if err := checkContentEncoding(r); err != nil {
		w.Header().Set("Accept-Encoding", "identity") // RFC 7694: the codings a request body may have
		return nil, err
	}
	if err := checkContentType(r); err != nil {
		return nil, err
	}
	if r.Body != nil && r.Body != http.NoBody && (r.Method == http.MethodPost || r.Method == http.MethodPatch || r.Method == http.MethodPut) {
		body, err := s.readRequestBody(w, r)
		if err != nil {
			return nil, err
		}
		c.body = body
	}
	if key := r.Header.Get("Idempotency-Key"); ep.idempotent && key != "" {
		if c.idem, err = idempotencyParams(c, key); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// readRequestBody reads the request body, capped at Config.MaxBodyBytes
// (413 body_too_large), within Config.BodyReadTimeout of real time (408
// request_timeout): a client that announces a body and never sends it
// would otherwise hold the request forever, since the http.Server has no
// ReadTimeout (it would cut the event stream). The read deadline is set on
// the connection for the read and cleared after it, except after a
// timeout: that answer carries Connection: close and the expired deadline
// stays, so that net/http, which reads what is left of a body before it
// closes a connection, fails that read at once and closes the connection
// right after the 408 instead of waiting for the rest of the body.
func (s *Server) readRequestBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	rc := http.NewResponseController(w)
	// A socket deadline is wall-clock time, not the store's clock (Config.Now).
	deadlineSet := rc.SetReadDeadline(time.Now().Add(s.cfg.BodyReadTimeout)) == nil
	body, err := readBody(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if clasp.ErrorCode(err) == clasp.CodeRequestTimeout {
		w.Header().Set("Connection", "close")
		return body, err
	}
	if deadlineSet {
		_ = rc.SetReadDeadline(time.Time{})
	}
	return body, err
}

// maxIdempotencyKey bounds the Idempotency-Key header.
const maxIdempotencyKey = 255

// idempotencyParams returns the store parameters of a creating request's
// Idempotency-Key (RULES.md, Errors and requests): the key is the caller's (the actor id),
// and the request hash covers method, path and body, so the same key on
// another endpoint or with another body is another request (422
// idempotency_key_reused from the store). The store records the key in the
// creating transaction and replays the creation on a repeat. 400
// invalid_request for a key that is not 1-255 printable ASCII characters.
func idempotencyParams(c *call, key string) (*store.IdempotencyParams, error) {
	if len(key) > maxIdempotencyKey || strings.IndexFunc(key, func(r rune) bool { return r < 0x21 || r > 0x7e }) >= 0 {
		return nil, clasp.InvalidField("Idempotency-Key", "The Idempotency-Key header must be 1 to %d printable ASCII characters.", maxIdempotencyKey)
	}
	h := sha256.New()
	h.Write([]byte(c.r.Method + "\n" + c.r.URL.Path + "\n"))
	h.Write(c.body)
	return &store.IdempotencyParams{ActorID: c.actor().ID(), Key: key, RequestHash: hex.EncodeToString(h.Sum(nil))}, nil
}

// maxPageLimit is the most rows one page returns (RULES.md, Errors and requests).
const maxPageLimit = 1000

// pageParams reads limit (an integer from 1 to 1000, default 100) and
// cursor from the query. 400 invalid_request naming the parameter for a
// limit that is not an integer from 1 to 1000 (a larger one is refused,
// not clamped: a client asking for more would silently get less), an
// overlong cursor, or either given more than once (which one would win is
// a guess).
func pageParams(q url.Values) (store.Page, error) {
	p := store.Page{Limit: 100}
	for _, name := range []string{"limit", "cursor"} {
		if len(q[name]) > 1 {
			return p, clasp.InvalidField(name, "Query parameter %s is given %d times; give it once.", name, len(q[name]))
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPageLimit {
			return p, clasp.InvalidField("limit", "Query parameter limit must be an integer from 1 to %d, not %q.", maxPageLimit, truncate(v, 32))
		}
		p.Limit = n
	}
	p.Cursor = q.Get("cursor")
	if len(p.Cursor) > 512 {
		return p, clasp.InvalidField("cursor", "Query parameter cursor is not one this server returned.")
	}
	return p, nil
}

// setNextLink sets Link: <path?...&cursor=next>; rel="next" (RFC 8288) when
// next is not empty, keeping the request's other query parameters.
func setNextLink(c *call, param, next string) {
	if next == "" {
		return
	}
	q := c.r.URL.Query()
	q.Set(param, next)
	u := url.URL{Path: c.r.URL.Path, RawQuery: q.Encode()}
	c.w.Header().Set("Link", "<"+u.String()+`>; rel="next"`)
}

// list returns items as a bare JSON array, never null.
func list[T any](items []T) []T {
	if items == nil {
		return []T{}
	}
	return items
}

// closeIfBodyUnread marks the answer Connection: close when the request
// has a body that was never read (refused before it: auth, access, route).
// Otherwise net/http would try to read the rest of that body before
// answering, and a client that never sends it would hold the connection
// forever; closing also spares reading a body nobody wants.
func closeIfBodyUnread(w http.ResponseWriter, r *http.Request, c *call) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return
	}
	if c != nil && c.body != nil {
		return
	}
	w.Header().Set("Connection", "close")
}

// checkQueryText refuses a query whose names or values, once unescaped,
// are not UTF-8 text or hold a NUL: no filter can match such text, and
// PostgreSQL refuses it as a parameter (SQLSTATE 22021) where SQLite
// would only match nothing, so both stores answer alike. It returns 400
// invalid_request naming the parameter (details.field), or nil.
func checkQueryText(vals url.Values) error {
	for name, vs := range vals {
		if !utf8.ValidString(name) || strings.IndexByte(name, 0) >= 0 {
			return clasp.InvalidField("query", "A query parameter name is not UTF-8 text or holds a NUL (%q); send percent-escaped UTF-8.", truncate(name, 64))
		}
		for _, v := range vs {
			if !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
				return clasp.InvalidField(name, "Query parameter %s is not UTF-8 text or holds a NUL (%q); send percent-escaped UTF-8.", name, truncate(v, 64))
			}
		}
	}
	return nil
}
