package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/secret"
	"github.com/clasp-dev/clasp/internal/store"
)

// Board session lifetimes (RULES.md, Actors and credentials): a session
// ends after DefaultSessionIdle without a request, and at the latest
// DefaultSessionMaxAge after it was opened.
const (
	DefaultSessionIdle   = 12 * time.Hour
	DefaultSessionMaxAge = 7 * 24 * time.Hour
)

// useRecordInterval is how often a token's or a session's use is written
// (lastUsedAt, the idle clock): at most once a minute each.
const useRecordInterval = time.Minute

// operator is who acts as the board: the operator token a request
// authenticated with, its role and its scope.
type operator struct {
	id      string // the operator token's id; "" for the tokenless admin of --local-trusted
	name    string
	role    clasp.OperatorRole
	company string // the one company it may see; "" for every company
}

// localOperator is the board of --local-trusted: a request without a token,
// from a loopback name, is an unscoped admin.
var localOperator = &operator{name: "local", role: clasp.RoleAdmin}

func operatorOf(t *clasp.OperatorToken) *operator {
	op := &operator{id: t.ID, name: t.Name, role: t.Role}
	if t.CompanyID != nil {
		op.company = *t.CompanyID
	}
	return op
}

// company returns the company the caller is confined to: an agent's own,
// a company-scoped operator's, or "" for an operator of every company.
func (p principal) company() string {
	if p.gate != nil {
		return p.gate.CompanyID
	}
	if p.board {
		return p.op.company
	}
	return p.agent.CompanyID
}

// sees reports whether the caller may see the rows of company companyID.
func (c *call) sees(companyID string) bool {
	scope := c.who.company()
	return scope == "" || scope == companyID
}

// errRevokedOperator is the 401 of an operator token or a board session
// that no longer works.
func errRevokedOperator(what string) error {
	return clasp.Errorf(clasp.CodeUnauthenticated, "The %s is revoked or expired.", what)
}

// authenticateOperator finds the operator token whose secret has hash
// (token is the secret itself, kind its kind). It returns nil, nil when no
// operator token has that hash (the caller tries the other kinds); 401
// unauthenticated when the token is revoked or expired. The board token
// of a server started before operator tokens existed (setting
// board_token_hash) is honoured as an admin token named "board", stored as
// one the first time it is used (adoptBoardToken). A use is recorded at
// most once a minute.
func (s *Server) authenticateOperator(ctx context.Context, token, hash, kind string) (*operator, error) {
	t, err := s.st.OperatorTokenFind(ctx, hash)
	switch {
	case clasp.ErrorCode(err) == clasp.CodeNotFound:
		if kind == TokenOperator {
			return nil, nil
		}
		if t, err = s.adoptBoardToken(ctx, token, hash); err != nil || t == nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	}
	if !t.Usable(s.now()) {
		return nil, errRevokedOperator("operator token")
	}
	s.recordOperatorUse(ctx, t)
	return operatorOf(t), nil
}

// adoptBoardToken stores the board token of setting board_token_hash as
// an admin operator token named "board", of every company, when hash is
// that token's; nil, nil when it is not. A token stored so once, even
// revoked since, is never stored again (its hash is unique).
func (s *Server) adoptBoardToken(ctx context.Context, token, hash string) (*clasp.OperatorToken, error) {
	ok, err := s.isBoardToken(ctx, hash)
	if err != nil || !ok {
		return nil, err
	}
	prefix := secret.ID(token)
	if prefix == "" {
		prefix = secret.Prefix + secret.Board
	}
	t, err := s.st.OperatorTokenCreate(ctx, &store.OperatorTokenCreateParams{Name: "board", Role: clasp.RoleAdmin, TokenHash: hash, Prefix: prefix, At: s.now()})
	if clasp.ErrorCode(err) == clasp.CodeAlreadyExists {
		return s.st.OperatorTokenFind(ctx, hash) // adopted by a concurrent request
	}
	if err == nil {
		s.log.Info("board token stored as the admin operator token \"board\"", "operator", t.ID)
	}
	return t, err
}

// recordOperatorUse writes t's lastUsedAt when the one stored is a minute
// old or more. A failure is logged; it refuses nothing.
func (s *Server) recordOperatorUse(ctx context.Context, t *clasp.OperatorToken) {
	now := s.now()
	if t.LastUsedAt != nil && now.Sub(*t.LastUsedAt) < useRecordInterval {
		return
	}
	if err := s.st.OperatorTokenUsed(ctx, t.ID, now); err != nil && ctx.Err() == nil {
		s.log.Warn("record operator token use", "operator", t.ID, "err", err)
	}
}

// authenticateSession finds the board session whose secret has hash: 401
// unauthenticated when there is none (never opened, or signed out), when
// its operator token is revoked or expired, when it was idle for
// Config.SessionIdle or opened more than Config.SessionMaxAge ago.
func (s *Server) authenticateSession(ctx context.Context, hash string) (principal, error) {
	sess, err := s.st.BoardSessionFind(ctx, hash)
	if clasp.ErrorCode(err) == clasp.CodeNotFound {
		return principal{}, clasp.Errorf(clasp.CodeUnauthenticated, "The board session has ended (signed out, or its token was revoked); sign in again.")
	}
	if err != nil {
		return principal{}, err
	}
	now := s.now()
	if !sess.Token.Usable(now) || !now.Before(sess.ExpiresAt) || now.Sub(sess.LastSeenAt) >= s.sessionIdle {
		return principal{}, clasp.Errorf(clasp.CodeUnauthenticated, "The board session has expired, or its token was revoked; sign in again.")
	}
	if now.Sub(sess.LastSeenAt) >= useRecordInterval {
		if err := s.st.BoardSessionSeen(ctx, hash, now); err != nil && ctx.Err() == nil {
			s.log.Warn("record board session use", "operator", sess.Token.ID, "err", err)
		}
	}
	s.recordOperatorUse(ctx, sess.Token)
	return principal{board: true, op: operatorOf(sess.Token), session: hash}, nil
}

// authorize decides whether the caller may call the endpoint at all
// (RULES.md, Actors and credentials); handlers decide only what a caller
// may see (sees, company). Agents get 403 on board routes; the board gets
// 403 on agent routes; an operator token of role viewer gets 403 on every
// write (any method but GET and HEAD, except signing in and out); only
// admins call admin routes (operator tokens, company creation), and a
// company-scoped admin creates no company.
func (s *Server) authorize(c *call) error {
	who, ep := c.who, c.ep
	route := routeLabel(ep.pattern)
	switch {
	case who.gate != nil && ep.access != gateOnly:
		// G4: a gate token reads the gate's verdicts and nothing else.
		return clasp.Errorf(clasp.CodeForbidden, "A gate token may call only POST /api/gate/check, not %s.", route)
	case who.gate != nil:
		return nil
	case ep.access == gateOnly:
		return clasp.Errorf(clasp.CodeForbidden, "Only a gate token may call %s: create one with clasp gate token create.", route)
	case (ep.access == boardOnly || ep.access == adminOnly) && !who.board:
		return clasp.Errorf(clasp.CodeForbidden, "Only the board may call %s.", route)
	case ep.access == agentOnly && who.board:
		return clasp.Errorf(clasp.CodeForbidden, "Only an agent may call %s; the board has no agent identity.", route)
	}
	if !who.board {
		return nil
	}
	op := who.op
	if op.role == clasp.RoleViewer && !ep.anyRole && c.r.Method != http.MethodGet && c.r.Method != http.MethodHead {
		return clasp.Errorf(clasp.CodeForbidden, "This operator token is read-only (role viewer): it may not call %s.", route).
			WithDetails("role", string(op.role))
	}
	if ep.access == adminOnly && op.role != clasp.RoleAdmin {
		return clasp.Errorf(clasp.CodeForbidden, "Only an operator token of role admin may call %s; this one's role is %s.", route, op.role).
			WithDetails("role", string(op.role))
	}
	if ep.unscoped && op.company != "" {
		return clasp.Errorf(clasp.CodeForbidden, "An operator token scoped to one company may not call %s.", route)
	}
	return nil
}

// adminForAdapter refuses (403) an agent's adapter settings to an operator
// token that is not an admin's: an adapter is a command the server runs
// on its own host, which reaches beyond any company scope.
func adminForAdapter(c *call) error {
	if c.who.op.role == clasp.RoleAdmin && c.who.op.company == "" {
		return nil
	}
	if c.who.op.role == clasp.RoleAdmin {
		// The command runs on the server's host, as the server's user
		// unless --agent-uid-range or --agent-user says otherwise: it
		// could read the data directory and every company's data.
		return clasp.Errorf(clasp.CodeForbidden, "Only an admin token of every company may set an agent's adapter: it is a command the server runs on its host, which reaches past one company; this token is scoped to company %s.", c.who.op.company).
			WithDetails("field", "adapter").WithDetails("role", string(c.who.op.role))
	}
	return clasp.Errorf(clasp.CodeForbidden, "Only an admin token of every company may set an agent's adapter (a command the server runs on its host); this one's role is %s.", c.who.op.role).
		WithDetails("field", "adapter").WithDetails("role", string(c.who.op.role))
}

// companyRoute checks the {companyId} of a company route against the
// caller's scope: an agent of another company gets 403 forbidden; an
// operator scoped to another company gets the 404 of a company that does
// not exist, so that the answer never tells whether the id exists.
func (c *call) companyRoute() error {
	cid := c.r.PathValue("companyId")
	if cid == "" {
		return nil
	}
	id, _ := parseUUID(cid) // checkPathIDs checked it
	if c.sees(id) {
		return nil
	}
	if c.who.board {
		return store.ErrNotFound("company", id)
	}
	return clasp.Errorf(clasp.CodeForbidden, "An agent may act only in its own company.")
}

// checkAgentVisible answers, for an operator scoped to one company, the
// 404 of a missing agent when agent id is of another company; nil for
// every other caller (the handlers check agents' own rules).
func (s *Server) checkAgentVisible(ctx context.Context, c *call, id string) error {
	if !c.who.board || c.who.op.company == "" {
		return nil
	}
	a, err := s.st.AgentGet(ctx, id)
	if err != nil {
		return err
	}
	if !c.sees(a.CompanyID) {
		return notVisible("agent", id)
	}
	return nil
}

// checkIssueVisible answers, for an operator scoped to one company, the
// 404 of a missing issue when issue ref is of another company, before a
// write names it (an issue never changes company); nil for every other
// caller, whose scope the store applies.
func (s *Server) checkIssueVisible(ctx context.Context, c *call, ref string) error {
	if !c.who.board || c.who.op.company == "" {
		return nil
	}
	_, err := s.st.IssueGet(ctx, c.who.op.company, ref)
	return err
}

// operatorOut is the caller's operator, GET /api/operators/me.
type operatorOut struct {
	ID        *string            `json:"id"` // null for the tokenless board of --local-trusted
	Name      string             `json:"name"`
	Role      clasp.OperatorRole `json:"role"`
	CompanyID *string            `json:"companyId"` // null: every company
	// Session says whether the request came with a board session.
	Session bool `json:"session"`
}

// operatorMe: GET /api/operators/me (the board, any role): the operator
// the caller acts as.
func (s *Server) operatorMe(ctx context.Context, c *call) (int, any, error) {
	op := c.who.op
	out := &operatorOut{Name: op.name, Role: op.role, Session: c.who.session != ""}
	if op.id != "" {
		out.ID = &op.id
	}
	if op.company != "" {
		out.CompanyID = &op.company
	}
	return http.StatusOK, out, nil
}

// operatorTokenCreateIn is the body of POST /api/operators/tokens.
type operatorTokenCreateIn struct {
	Name      *string             `json:"name"`
	Role      *clasp.OperatorRole `json:"role"`
	CompanyID *string             `json:"companyId"`
	ExpiresAt *time.Time          `json:"expiresAt"`
}

func (in *operatorTokenCreateIn) validate() error {
	if err := requiredText("name", in.Name, maxNameLen); err != nil {
		return err
	}
	if in.Role == nil || !in.Role.Valid() {
		return clasp.InvalidField("role", "Field \"role\" must be admin, operator or viewer.")
	}
	return uuidField("companyId", in.CompanyID)
}

// operatorTokenCreate: POST /api/operators/tokens (admin) {name, role,
// companyId?, expiresAt?}. 201 the token with its secret, shown this once
// and stored only as its hash. A company-scoped admin creates tokens of
// its own company only (companyId defaults to it; another is 404, as a
// missing one). 400 for an expiry in the past; 404 for a missing company.
func (s *Server) operatorTokenCreate(ctx context.Context, c *call, in *operatorTokenCreateIn) (int, any, error) {
	company := ""
	if in.CompanyID != nil {
		company, _ = parseUUID(*in.CompanyID)
	}
	if scope := c.who.op.company; scope != "" {
		if company == "" {
			company = scope
		} else if company != scope {
			return 0, nil, store.ErrNotFound("company", company)
		}
	}
	if in.ExpiresAt != nil && !in.ExpiresAt.After(s.now()) {
		return 0, nil, clasp.InvalidField("expiresAt", "Field \"expiresAt\" must be in the future.")
	}
	return s.newOperatorToken(ctx, &store.OperatorTokenCreateParams{Name: *in.Name, Role: *in.Role, CompanyID: company, ExpiresAt: in.ExpiresAt})
}

// newOperatorToken stores a new operator token of p (its secret made
// here) and answers 201 with the secret.
func (s *Server) newOperatorToken(ctx context.Context, p *store.OperatorTokenCreateParams) (int, any, error) {
	token, hash := NewToken(TokenOperator)
	p.TokenHash, p.Prefix, p.At = hash, token[:KeyPrefixLen], s.now()
	t, err := s.st.OperatorTokenCreate(ctx, p)
	if err != nil {
		return 0, nil, err
	}
	t.Token = token
	return http.StatusCreated, t, nil
}

// operatorTokenList: GET /api/operators/tokens (admin): the operator
// tokens, oldest first, never the secrets; a company-scoped admin's list
// holds its company's only.
func (s *Server) operatorTokenList(ctx context.Context, c *call) (int, any, error) {
	ts, err := s.st.OperatorTokenList(ctx, c.who.op.company)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, list(ts), nil
}

// visibleOperatorToken returns the operator token of the path's {id}: 404
// for a missing one and, for a company-scoped admin, one of another scope.
func (s *Server) visibleOperatorToken(ctx context.Context, c *call) (*clasp.OperatorToken, error) {
	id := pathUUID(c, "id")
	t, err := s.st.OperatorTokenGet(ctx, id)
	if err != nil {
		return nil, err
	}
	if scope := c.who.op.company; scope != "" && (t.CompanyID == nil || *t.CompanyID != scope) {
		return nil, notVisible("operator token", id)
	}
	return t, nil
}

// operatorTokenRevoke: DELETE /api/operators/tokens/{id} (admin). 200 the
// token, revoked (revoking twice answers it unchanged); its board
// sessions end with it. From then on it authenticates nothing, on every
// replica (no server keeps operator tokens in a cache). 404.
func (s *Server) operatorTokenRevoke(ctx context.Context, c *call) (int, any, error) {
	t, err := s.visibleOperatorToken(ctx, c)
	if err != nil {
		return 0, nil, err
	}
	t, err = s.st.OperatorTokenRevoke(ctx, t.ID, s.now())
	if err != nil {
		return 0, nil, err
	}
	s.log.Info("operator token revoked", "operator", t.ID, "name", t.Name, "by", c.who.op.id, "request_id", RequestIDFrom(ctx))
	return http.StatusOK, t, nil
}

// operatorTokenRotate: POST /api/operators/tokens/{id}/rotate (admin): a
// new token with the same name, role, scope and expiry, then the old one
// revoked. 201 the new token with its secret; 404; 409 run_not_live is
// never answered: rotating a revoked token is 422 precondition_failed.
func (s *Server) operatorTokenRotate(ctx context.Context, c *call, _ *emptyIn) (int, any, error) {
	old, err := s.visibleOperatorToken(ctx, c)
	if err != nil {
		return 0, nil, err
	}
	if !old.Usable(s.now()) {
		return 0, nil, clasp.Errorf(clasp.CodePreconditionFailed, "Operator token %s is revoked or expired; create a new one instead.", old.ID)
	}
	p := &store.OperatorTokenCreateParams{Name: old.Name, Role: old.Role, ExpiresAt: old.ExpiresAt}
	if old.CompanyID != nil {
		p.CompanyID = *old.CompanyID
	}
	status, out, err := s.newOperatorToken(ctx, p)
	if err != nil {
		return 0, nil, err
	}
	if _, err := s.st.OperatorTokenRevoke(ctx, old.ID, s.now()); err != nil {
		return 0, nil, err
	}
	s.log.Info("operator token rotated", "operator", old.ID, "new", out.(*clasp.OperatorToken).ID, "by", c.who.op.id, "request_id", RequestIDFrom(ctx))
	return status, out, nil
}

// sessionOut is the answer to POST /api/sessions.
type sessionOut struct {
	// Session is the session's secret (a clasp_bs_ credential): the bearer
	// of the signed-in browser's requests, shown this once.
	Session   string      `json:"session"`
	ExpiresAt time.Time   `json:"expiresAt"`   // the absolute end
	IdleSecs  int         `json:"idleSeconds"` // it ends after this long without a request
	Operator  operatorOut `json:"operator"`
}

// sessionCreate: POST /api/sessions (the board, any role, with an operator
// token itself: neither a session nor the tokenless board). 201 a new
// board session of that token. The board's sign-in calls it; the browser's
// cookie then carries the session's secret, never the token.
func (s *Server) sessionCreate(ctx context.Context, c *call, _ *emptyIn) (int, any, error) {
	op := c.who.op
	if c.who.session != "" || op.id == "" {
		return 0, nil, clasp.Errorf(clasp.CodeForbidden, "A board session is opened with an operator token, not with a session or without a token.")
	}
	token, hash := NewToken(TokenSession)
	now := s.now()
	exp := now.Add(s.sessionMaxAge)
	if err := s.st.BoardSessionCreate(ctx, &store.BoardSessionCreateParams{Hash: hash, TokenID: op.id, At: now, ExpiresAt: exp}); err != nil {
		return 0, nil, err
	}
	s.log.Info("board session opened", "operator", op.id, "name", op.name, "request_id", RequestIDFrom(ctx), "client", s.clientAddr(c.r))
	_, me, _ := s.operatorMe(ctx, c)
	return http.StatusCreated, &sessionOut{Session: token, ExpiresAt: exp, IdleSecs: int(s.sessionIdle / time.Second), Operator: *me.(*operatorOut)}, nil
}

// sessionDelete: DELETE /api/sessions/current (a board session): ends the
// session the request came with; 204. Without a session, 403.
func (s *Server) sessionDelete(ctx context.Context, c *call) (int, any, error) {
	if c.who.session == "" {
		return 0, nil, clasp.Errorf(clasp.CodeForbidden, "This request came with no board session to end; revoke an operator token with DELETE /api/operators/tokens/{id}.")
	}
	if err := s.st.BoardSessionDelete(ctx, c.who.session); err != nil {
		return 0, nil, err
	}
	s.log.Info("board session ended", "operator", c.who.op.id, "request_id", RequestIDFrom(ctx))
	c.w.WriteHeader(http.StatusNoContent)
	return 0, streamed, nil
}

// stillValid reports whether the credential of a long-lived request (the
// event stream) of the board still authenticates: an operator token or
// board session revoked, expired or ended makes it false. Errors other
// than 401 count as valid (checked again later).
func (s *Server) stillValid(c *call) bool {
	if !c.who.board || c.who.op.id == "" {
		return true
	}
	_, err := s.authenticate(c.r, c.ep)
	if err != nil && clasp.ErrorCode(err) != clasp.CodeUnauthenticated {
		s.log.LogAttrs(c.r.Context(), slog.LevelWarn, "event stream: re-authentication failed; checking again", slog.String("err", err.Error()))
		return true
	}
	return err == nil
}
