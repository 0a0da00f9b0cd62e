package httpapi

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
	"github.com/google/uuid"
)

// Run id headers (RULES.md, Actors and credentials). The second is the original protocol's.
const (
	RunIDHeader       = "X-Clasp-Run-Id"
	PaperclipRunIDHdr = "X-Paperclip-Run-Id"
)

// boardTokenSetting is the store setting holding the board token's hash.
const boardTokenSetting = "board_token_hash"

// principal is who is calling: the board, or an agent (possibly through a
// run token, which binds the request to one run). A board principal
// always carries its operator (op): the operator token it authenticated
// with (directly, or through a board session), or the tokenless admin of
// --local-trusted.
type principal struct {
	board    bool
	op       *operator
	session  string // the hash of the board session the request came with, "" for none
	agent    *clasp.Agent
	tokenRun *clasp.Run // set when the bearer is a run token
	// freshRun is the run the request names when the agent key's
	// authentication found it the agent's, live and renewed less than
	// Server.minRenew ago (store.AgentAuthenticateRun), at freshAt (real
	// time): touch then needs no second read.
	freshRun *clasp.Run
	freshAt  time.Time
	// key is the agent API key the request authenticated with ("" for a
	// run token or the board): the secret an idempotent run open derives
	// its run token from (runTokenFor); hash is its hash.
	key, hash string
	// gate is the gate token the request authenticated with: it may call
	// the gate's check alone (RULES.md G4).
	gate *clasp.GateToken
}

// authenticate resolves the caller (RULES.md, Actors and credentials). A bearer token is
// matched, by its kind, against the operator tokens (the board token is
// one), the board sessions, the agent API keys and the run tokens; tokens
// without a clasp prefix are tried against all but the sessions. A clasp-prefixed token that fails its format or
// checksum (package secret) is refused before any lookup. Without Authorization, only LocalTrusted mode with a
// loopback Host makes the board. Errors: 401 unauthenticated (no, bad,
// revoked or terminated credentials), 403 forbidden (no token on a
// non-loopback Host in local-trusted mode).
func (s *Server) authenticate(r *http.Request, ep *endpoint) (principal, error) {
	authz := r.Header.Get("Authorization")
	if authz == "" {
		if !s.cfg.LocalTrusted {
			return principal{}, clasp.Errorf(clasp.CodeUnauthenticated, "Send Authorization: Bearer <token> (an agent API key, a run token or an operator token such as the board token).")
		}
		if !loopbackHost(r.Host) {
			return principal{}, clasp.Errorf(clasp.CodeForbidden, "This server trusts requests without a token only when addressed by a loopback name (localhost, 127.0.0.1, [::1]), not %q.", r.Host)
		}
		return principal{board: true, op: localOperator}, nil
	}
	scheme, token, ok := strings.Cut(authz, " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return principal{}, clasp.Errorf(clasp.CodeUnauthenticated, "The Authorization header must be \"Bearer <token>\".")
	}
	kind, wellFormed := tokenKind(token)
	if !wellFormed {
		// A mistyped or truncated clasp credential: refused without a lookup.
		return principal{}, clasp.Errorf(clasp.CodeUnauthenticated, "The bearer token is malformed: it starts like a clasp credential but its length or checksum is wrong (a typo, or a truncated copy).")
	}
	ctx := r.Context()
	hash := HashToken(token)
	if kind == TokenSession {
		return s.authenticateSession(ctx, hash)
	}
	if kind == TokenGate {
		return s.authenticateGate(ctx, hash)
	}
	if kind == TokenBoard || kind == TokenOperator || kind == "" {
		op, err := s.authenticateOperator(ctx, token, hash, kind)
		if err != nil {
			return principal{}, err
		}
		if op != nil {
			return principal{board: true, op: op}, nil
		}
	}
	if kind == TokenAgentKey || kind == "" {
		named := namedRun(r, ep)
		if a, run, ok, refresh := s.creds.get(hash, named); ok {
			if refresh {
				s.refreshCredential(hash, named)
			}
			// The run is believed fresh as the store would judge it now:
			// live, its last sign of life less than minRenew old.
			if now := s.now(); run != nil && (!run.Live(now) || run.LastSignOfLifeAt == nil || now.Sub(*run.LastSignOfLifeAt) >= s.minRenew) {
				run = nil
			}
			return principal{agent: a, freshRun: run, freshAt: time.Now(), key: token, hash: hash}, nil
		}
		at, gen := s.creds.begin()
		a, run, err := s.st.AgentAuthenticateRun(ctx, hash, named, s.minRenew)
		if err == nil {
			now := time.Now()
			s.creds.put(at, gen, hash, named, a, run)
			return principal{agent: a, freshRun: run, freshAt: now, key: token, hash: hash}, nil
		}
		if clasp.ErrorCode(err) != clasp.CodeUnauthenticated {
			return principal{}, err
		}
	}
	if kind == TokenRun || kind == "" {
		a, run, err := s.st.RunAuthenticate(ctx, hash)
		if err == nil {
			return principal{agent: a, tokenRun: run}, nil
		}
		if clasp.ErrorCode(err) != clasp.CodeUnauthenticated {
			return principal{}, err
		}
	}
	return principal{}, clasp.Errorf(clasp.CodeUnauthenticated, "The bearer token is unknown, revoked, or belongs to a terminated agent or an ended run.")
}

// refreshCredential reads agent key hash and named run from the store
// again in a goroutine of its own (store.AgentAuthenticateRun, as a
// request that found no cached entry would) and hands the answer to the
// credential cache (credCache.refreshed). It is bounded by the cache's
// ttl: an answer later than that would only replace an expired entry,
// which the next request reads itself.
func (s *Server) refreshCredential(hash, named string) {
	at, gen := s.creds.begin()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.creds.ttl)
		defer cancel()
		a, run, err := s.st.AgentAuthenticateRun(ctx, hash, named, s.minRenew)
		s.creds.refreshed(at, gen, hash, named, a, run, err)
	}()
}

// namedRun is the run a request names, for AgentAuthenticateRun to look
// at: its run header, or else the path's run on a run endpoint; "" when
// it names none, or none well-formed (prepare reports those errors after
// the authentication's, in their usual order).
func namedRun(r *http.Request, ep *endpoint) string {
	id, _, err := runHeader(r)
	if err != nil {
		return ""
	}
	if id == "" && ep != nil && ep.run == runInPath {
		id, _ = parseUUID(r.PathValue("id"))
	}
	return id
}

// isBoardToken reports whether hash is the board token's hash. With no
// board token configured, no token is the board's.
func (s *Server) isBoardToken(ctx context.Context, hash string) (bool, error) {
	want, err := s.st.SettingGet(ctx, boardTokenSetting)
	if err != nil {
		if clasp.ErrorCode(err) == clasp.CodeNotFound {
			return false, nil
		}
		return false, err
	}
	return want != "" && hashEqual(hash, want), nil
}

// loopbackHost reports whether a Host header value names the local machine:
// localhost, 127.0.0.1 (any 127/8 address) or [::1], with an optional port.
func loopbackHost(host string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		h = host[1 : len(host)-1]
	}
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// parseUUID returns s in canonical (lower-case, hyphenated) form if it is a
// UUID written in the 36-character hyphenated form, in either case.
func parseUUID(s string) (string, bool) {
	if len(s) != 36 {
		return "", false
	}
	u, err := uuid.Parse(s)
	if err != nil {
		return "", false
	}
	if strings.IndexFunc(s, func(r rune) bool { return r >= 'A' && r <= 'F' }) < 0 {
		return s, true // already canonical: Parse accepted only hex digits and hyphens
	}
	return u.String(), true
}

// runHeader returns the run id a request names in X-Clasp-Run-Id or
// X-Paperclip-Run-Id ("" if none) and the header's name. 400
// invalid_request (details.field the header) if it is not a UUID or the two
// headers disagree.
func runHeader(r *http.Request) (id, name string, err error) {
	a := strings.TrimSpace(r.Header.Get(RunIDHeader))
	b := strings.TrimSpace(r.Header.Get(PaperclipRunIDHdr))
	for _, h := range []struct{ v, name string }{{a, RunIDHeader}, {b, PaperclipRunIDHdr}} {
		if h.v == "" {
			continue
		}
		u, ok := parseUUID(h.v)
		if !ok {
			return "", "", clasp.InvalidField(h.name, "Header %s must be a run id (a UUID), not %q.", h.name, truncate(h.v, 64))
		}
		if id != "" && id != u {
			return "", "", clasp.InvalidField(h.name, "Headers %s and %s name different runs.", RunIDHeader, PaperclipRunIDHdr)
		}
		id, name = u, h.name
	}
	return id, name, nil
}

// truncate shortens s to at most n bytes for messages.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// actor returns the store actor of a call: the board with its operator
// (whose id every activity row it writes names, and whose company scope
// confines the store's lookups), or the agent with its company and (when
// it names one) its run.
func (c *call) actor() store.Actor {
	rid := RequestIDFrom(c.r.Context())
	if g := c.who.gate; g != nil {
		// A gate token writes nothing (authorize refuses it every write
		// route); it is named in logs as itself.
		return store.Actor{Type: clasp.ActorGate, OperatorID: g.ID, CompanyID: g.CompanyID, RequestID: rid}
	}
	if c.who.board {
		return store.Actor{Type: clasp.ActorBoard, OperatorID: c.who.op.id, CompanyID: c.who.op.company, RequestID: rid}
	}
	return store.Actor{Type: clasp.ActorAgent, AgentID: c.who.agent.ID, CompanyID: c.who.agent.CompanyID, RunID: c.runID, RequestID: rid}
}

// touch checks the run the call names, if any, and renews its lease (RULES.md,
// Leases: a live run's request is a sign of life; at most one write per
// min(MinRenewInterval, LeaseTTL/3) unless the endpoint forces it). Errors:
// for a run named by a header, 422 run_not_found (also for a run of another
// company, which is not visible); for the run of the path (heartbeat,
// finish), 404 not_found in both cases, as for any resource by id; 403 run_not_owned, 409 run_not_live.
func (c *call) touch(ctx context.Context) error {
	if c.runID == "" || c.who.board || c.run != nil {
		return nil
	}
	if f := c.who.freshRun; f != nil && f.ID == c.runID && !c.ep.forceTouch && time.Since(c.who.freshAt) < c.s.minRenew {
		// The authentication found this run the agent's, live and
		// renewed less than minRenew ago, and less than minRenew has
		// passed since (a slow body would have taken longer): RunTouch
		// would write nothing and answer this run. Its lease (this
		// server's TTL, at least 3 x minRenew) has not run out since
		// (RULES.md, Actors and credentials); the lock rules re-check the run anyway.
		c.run = f
		return nil
	}
	at, gen := c.s.creds.begin()
	run, err := c.s.st.RunTouch(ctx, &store.RunTouchParams{
		RunID:            c.runID,
		AgentID:          c.who.agent.ID,
		LeaseTTL:         c.s.lease,
		Force:            c.ep.forceTouch,
		MinRenewInterval: c.s.minRenew,
	})
	if err != nil {
		switch clasp.ErrorCode(err) {
		case clasp.CodeRunNotFound:
			return c.runNotFound()
		case clasp.CodeRunNotOwned:
			// Another company's run is not visible to this agent.
			if other, gerr := c.s.st.RunGet(ctx, c.runID); gerr == nil && other.CompanyID != c.who.agent.CompanyID {
				return c.runNotFound()
			}
		}
		return c.namedByHeader(err)
	}
	c.run = run
	if c.who.hash != "" && c.runHeader != "" {
		// The run is live and its lease renewed less than minRenew ago:
		// the next requests of this key naming it need not read it again.
		c.s.creds.put(at, gen, c.who.hash, c.runID, c.who.agent, run)
	}
	return nil
}

// runNotFound is the error for a named run that does not exist or is not
// visible to the caller: 404 not_found when the path names it, 422
// run_not_found when a header does (RULES.md, Actors and credentials).
func (c *call) runNotFound() error {
	if c.ep.run == runInPath && c.runHeader == "" {
		return clasp.Errorf(clasp.CodeNotFound, "Run %s does not exist.", c.runID)
	}
	if c.ep.run == runInPath {
		return c.namedByHeader(clasp.Errorf(clasp.CodeNotFound, "Run %s does not exist.", c.runID))
	}
	return c.namedByHeader(clasp.Errorf(clasp.CodeRunNotFound, "Run %s does not exist.", c.runID).WithDetails("runId", c.runID))
}

// namedByHeader adds to a *clasp.Error about the call's run the header
// that named it, in the message and as details.header, so that a client
// that sent X-Paperclip-Run-Id reads its own header's name. Other errors, and calls whose run no header named, pass unchanged.
func (c *call) namedByHeader(err error) error {
	var ce *clasp.Error
	if c.runHeader == "" || !errors.As(err, &ce) {
		return err
	}
	out := *ce
	out.Message = strings.TrimSuffix(ce.Message, ".") + " (the run named by the " + c.runHeader + " header)."
	out.Details = map[string]any{}
	for k, v := range ce.Details {
		out.Details[k] = v
	}
	out.Details["header"] = c.runHeader
	return &out
}
