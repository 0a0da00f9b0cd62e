package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// access says who may call an endpoint.
type access int

const (
	boardOnly access = iota + 1 // agents get 403 forbidden
	agentOnly                   // the board gets 403 forbidden
	anyone                      // the board or an agent
)

// runRule says how an endpoint treats the run an agent names.
type runRule int

const (
	// runOptional: a named run is checked and renewed; none is fine.
	runOptional runRule = iota
	// runRequired: an agent must name a live run (401 run_id_required).
	runRequired
	// runInPath: the run is the path's {id} (heartbeat, finish); a run
	// header or run token must name the same run.
	runInPath
)

// endpoint is one route of SPEC section 3 with its rules.
type endpoint struct {
	pattern string // Go 1.22 pattern, "POST /api/issues/{id}/checkout"
	access  access
	run     runRule
	// tokenOnly: with Config.RequireRunToken, agents must authenticate with
	// a run token (SPEC section 2).
	tokenOnly bool
	// forceTouch: renew the run's lease even if renewed less than
	// MinRenewInterval ago (the heartbeat).
	forceTouch bool
	// idempotent: honours the Idempotency-Key header (creating requests).
	idempotent bool
	// serve does the work and returns the status and value of a success.
	serve func(ctx context.Context, c *call) (int, any, error)
}

// call is one request being served.
type call struct {
	s     *Server
	ep    *endpoint
	w     http.ResponseWriter
	r     *http.Request
	who   principal
	runID string     // the run the call names (header, run token or path), "" if none
	run   *clasp.Run // the named run, once touch checked it
	body  []byte     // the raw body, nil for none
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
// DELETE): it checks and renews the named run, then calls fn.
func noBody(fn func(ctx context.Context, c *call) (int, any, error)) func(context.Context, *call) (int, any, error) {
	return func(ctx context.Context, c *call) (int, any, error) {
		if err := c.touch(ctx); err != nil {
			return 0, nil, err
		}
		return fn(ctx, c)
	}
}

// handle registers ep on the mux.
func (s *Server) handle(ep endpoint) {
	s.mux.HandleFunc(ep.pattern, func(w http.ResponseWriter, r *http.Request) { s.serveEndpoint(w, r, &ep) })
}

// serveEndpoint runs the common steps of every /api endpoint, in order:
// authenticate (401/403), check access (403), read the run header (400) and
// the run rules (401 run_id_required), check the company of a company route
// (403), read the capped body (413), honour Idempotency-Key, then serve.
func (s *Server) serveEndpoint(w http.ResponseWriter, r *http.Request, ep *endpoint) {
	c, err := s.prepare(w, r, ep)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	if key := r.Header.Get("Idempotency-Key"); ep.idempotent && key != "" {
		s.serveIdempotent(ctx, c, key)
		return
	}
	status, v, err := ep.serve(ctx, c)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if v == streamed {
		return // the endpoint wrote its own response (event stream)
	}
	writeJSON(w, status, v)
}

// prepare authenticates and checks everything that needs no body.
func (s *Server) prepare(w http.ResponseWriter, r *http.Request, ep *endpoint) (*call, error) {
	who, err := s.authenticate(r)
	if err != nil {
		return nil, err
	}
	switch {
	case ep.access == boardOnly && !who.board:
		return nil, clasp.Errorf(clasp.CodeForbidden, "Only the board may call %s.", routeLabel(ep.pattern))
	case ep.access == agentOnly && who.board:
		return nil, clasp.Errorf(clasp.CodeForbidden, "Only an agent may call %s; the board has no agent identity.", routeLabel(ep.pattern))
	}
	c := &call{s: s, ep: ep, w: w, r: r, who: who}
	hdrRun, hdrName, err := runHeader(r)
	if err != nil {
		return nil, err
	}
	if who.board {
		if hdrRun != "" {
			return nil, clasp.InvalidField(hdrName, "The board never acts in a run; do not send %s.", hdrName)
		}
	} else {
		c.runID = hdrRun
		if who.tokenRun != nil {
			if hdrRun != "" && hdrRun != who.tokenRun.ID {
				return nil, clasp.Errorf(clasp.CodeForbidden, "The run token is bound to run %s, but %s names run %s.", who.tokenRun.ID, hdrName, hdrRun).
					WithDetails("field", hdrName)
			}
			c.runID = who.tokenRun.ID
		}
		if ep.run == runInPath {
			pathRun, ok := parseUUID(r.PathValue("id"))
			if !ok {
				return nil, clasp.Errorf(clasp.CodeNotFound, "Run %q does not exist.", truncate(r.PathValue("id"), 64))
			}
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
			return nil, clasp.Errorf(clasp.CodeRunIDRequired, "This call needs the run it acts in: send the %s header, or use a run token.", RunIDHeader)
		}
		if ep.tokenOnly && s.cfg.RequireRunToken && who.tokenRun == nil {
			return nil, clasp.Errorf(clasp.CodeUnauthenticated, "This server accepts only run tokens for this call (--require-run-token); authenticate with the runToken of your run.")
		}
	}
	if cid := r.PathValue("companyId"); cid != "" {
		id, ok := parseUUID(cid)
		if !who.board {
			if !ok || id != who.agent.CompanyID {
				return nil, clasp.Errorf(clasp.CodeForbidden, "An agent may act only in its own company.")
			}
		} else if !ok {
			return nil, clasp.Errorf(clasp.CodeNotFound, "Company %q does not exist.", truncate(cid, 64))
		}
	}
	if r.Body != nil && r.Body != http.NoBody && (r.Method == http.MethodPost || r.Method == http.MethodPatch || r.Method == http.MethodPut) {
		body, err := readBody(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
		if err != nil {
			return nil, err
		}
		c.body = body
	}
	return c, nil
}

// maxIdempotencyKey bounds the Idempotency-Key header.
const maxIdempotencyKey = 255

// serveIdempotent serves a creating request that carries an Idempotency-Key
// (SPEC section 3): the first request with (actor, key) runs and its 2xx
// answer is stored; a repeat with the same method, path and body gets the
// stored answer again (header Idempotent-Replayed: true) and creates
// nothing; the same key with another request answers 422
// idempotency_key_reused; a repeat while the first is still running, 409
// idempotency_in_flight. A failed first request (4xx/5xx) drops the
// reservation, so a retry runs afresh.
func (s *Server) serveIdempotent(ctx context.Context, c *call, key string) {
	w, r := c.w, c.r
	if len(key) > maxIdempotencyKey || strings.IndexFunc(key, func(r rune) bool { return r < 0x21 || r > 0x7e }) >= 0 {
		s.writeError(w, r, clasp.InvalidField("Idempotency-Key", "The Idempotency-Key header must be 1 to %d printable ASCII characters.", maxIdempotencyKey))
		return
	}
	actorID := c.actor().ID()
	h := sha256.New()
	h.Write([]byte(r.Method + "\n" + r.URL.Path + "\n"))
	h.Write(c.body)
	reqHash := hex.EncodeToString(h.Sum(nil))
	rec, err := s.st.IdempotencyBegin(ctx, actorID, key, reqHash)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if rec != nil {
		switch {
		case rec.RequestHash != reqHash:
			s.writeError(w, r, clasp.Errorf(clasp.CodeIdempotencyKeyReused, "This Idempotency-Key was used for a different request; use a new key.").
				WithDetails("field", "Idempotency-Key"))
		case rec.StatusCode == 0:
			s.writeError(w, r, clasp.Errorf(clasp.CodeIdempotencyInFlight, "The first request with this Idempotency-Key is still being handled; retry shortly."))
		default:
			w.Header().Set("Idempotent-Replayed", "true")
			writeRawJSON(w, rec.StatusCode, bytes.TrimRight(rec.Body, "\n"))
		}
		return
	}
	// The reservation is ours: complete it on success, drop it otherwise
	// (also on panic), detached from the request's cancellation.
	bg := context.WithoutCancel(ctx)
	done := false
	defer func() {
		if !done {
			if err := s.st.IdempotencyAbort(bg, actorID, key); err != nil {
				s.log.Error("idempotency abort", "actor", actorID, "err", err)
			}
		}
	}()
	status, v, err := c.ep.serve(ctx, c)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	body, err := json.Marshal(v)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.st.IdempotencyComplete(bg, actorID, key, status, body); err != nil {
		// The resource exists; answer it, but a retry will see the key as
		// in flight until the record expires.
		s.log.Error("idempotency complete", "actor", actorID, "err", err)
	}
	done = true
	writeRawJSON(w, status, body)
}

// pageParams reads limit (1..1000, default 100; larger values are clamped
// to 1000) and cursor from the query. 400 invalid_request naming the
// parameter for a limit that is not a positive integer or an overlong cursor.
func pageParams(q url.Values) (store.Page, error) {
	p := store.Page{Limit: 100}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return p, clasp.InvalidField("limit", "Query parameter limit must be an integer from 1 to 1000, not %q.", truncate(v, 32))
		}
		p.Limit = min(n, 1000)
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
