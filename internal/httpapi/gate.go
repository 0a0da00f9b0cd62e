package httpapi

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// authenticateGate finds the gate token whose secret has hash: a
// principal that may call the gate's check alone (RULES.md G4). 401 for
// an unknown or revoked one.
func (s *Server) authenticateGate(ctx context.Context, hash string) (principal, error) {
	t, err := s.st.GateTokenFind(ctx, hash)
	if clasp.ErrorCode(err) == clasp.CodeNotFound || (err == nil && t.RevokedAt != nil) {
		return principal{}, clasp.Errorf(clasp.CodeUnauthenticated, "The gate token is unknown or revoked.")
	}
	if err != nil {
		return principal{}, err
	}
	if t.LastUsedAt == nil || s.now().Sub(*t.LastUsedAt) >= useRecordInterval {
		if err := s.st.GateTokenUsed(ctx, t.ID, s.now()); err != nil && ctx.Err() == nil {
			s.log.Warn("record gate token use", "gateToken", t.ID, "err", err)
		}
	}
	return principal{gate: t}, nil
}

type gateStampIn struct {
	Issue *string `json:"issue"`
	Epoch *int64  `json:"epoch"`
}

type gateCheckIn struct {
	Stamps []gateStampIn `json:"stamps"`
}

func (in *gateCheckIn) validate() error {
	if in.Stamps == nil {
		return clasp.InvalidField("stamps", "Field \"stamps\" is required: a list of {issue, epoch}.")
	}
	if len(in.Stamps) > store.GateMaxStamps {
		return clasp.InvalidField("stamps", "At most %d stamps per check, not %d: split the range.", store.GateMaxStamps, len(in.Stamps))
	}
	for _, st := range in.Stamps {
		if st.Issue == nil || !validIssueRef(*st.Issue) || !strings.Contains(*st.Issue, "-") {
			return clasp.InvalidField("stamps", "Each stamp needs \"issue\", an identifier such as ACME-12.")
		}
		if st.Epoch == nil || *st.Epoch < 0 {
			return clasp.InvalidField("stamps", "Each stamp needs \"epoch\", a checkout epoch (0 or more).")
		}
	}
	return nil
}

// gateCheckOut is the answer of POST /api/gate/check: ok when every stamp
// may be written, and one verdict per stamp, in the order asked.
type gateCheckOut struct {
	OK      bool                 `json:"ok"`
	Results []*clasp.GateVerdict `json:"results"`
	// BranchTemplate and IssuePrefix are the gate's company's: a commit
	// without a stamp on a branch the template names is refused (G3).
	BranchTemplate string `json:"branchTemplate"`
	IssuePrefix    string `json:"issuePrefix"`
}

// gateCheck: POST /api/gate/check (a gate token) {stamps: [{issue,
// epoch}]}: whether commits carrying these stamps may be written, each
// judged in the gate token's company (RULES.md G1-G3), in one read. 400
// for more than 1000 stamps or a malformed one.
func (s *Server) gateCheck(ctx context.Context, c *call, in *gateCheckIn) (int, any, error) {
	stamps := make([]clasp.GateStamp, len(in.Stamps))
	for k, st := range in.Stamps {
		stamps[k] = clasp.GateStamp{Issue: *st.Issue, Epoch: *st.Epoch}
	}
	vs, err := s.st.GateCheck(ctx, c.who.gate.CompanyID, stamps)
	if err != nil {
		return 0, nil, err
	}
	co, err := s.st.CompanyGet(ctx, c.who.gate.CompanyID)
	if err != nil {
		return 0, nil, err
	}
	out := gateCheckOut{OK: true, Results: list(vs), BranchTemplate: co.BranchTemplate, IssuePrefix: co.IssuePrefix}
	for _, v := range vs {
		out.OK = out.OK && v.OK
	}
	return http.StatusOK, out, nil
}

type gateTokenCreateIn struct {
	Name *string `json:"name"`
}

func (in *gateTokenCreateIn) validate() error { return requiredText("name", in.Name, maxNameLen) }

// gateTokenCreate: POST /api/companies/{companyId}/gate-tokens (admin of
// the company) {name}: 201 the gate token with its secret, shown this
// once and stored only as its hash.
func (s *Server) gateTokenCreate(ctx context.Context, c *call, in *gateTokenCreateIn) (int, any, error) {
	token, hash := NewToken(TokenGate)
	t, err := s.st.GateTokenCreate(ctx, &store.GateTokenCreateParams{CompanyID: pathUUID(c, "companyId"), Name: *in.Name,
		TokenHash: hash, Prefix: token[:KeyPrefixLen], At: s.now()})
	if err != nil {
		return 0, nil, err
	}
	t.Token = token
	return http.StatusCreated, t, nil
}

// gateTokenList: GET /api/companies/{companyId}/gate-tokens (admin): the
// company's gate tokens, oldest first, never the secrets.
func (s *Server) gateTokenList(ctx context.Context, c *call) (int, any, error) {
	if _, err := s.st.CompanyGet(ctx, pathUUID(c, "companyId")); err != nil {
		return 0, nil, err
	}
	ts, err := s.st.GateTokenList(ctx, pathUUID(c, "companyId"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, list(ts), nil
}

// gateTokenRevoke: DELETE /api/companies/{companyId}/gate-tokens/{id}
// (admin): revokes it at once (its next request answers 401). 404 for
// none of this company.
func (s *Server) gateTokenRevoke(ctx context.Context, c *call) (int, any, error) {
	t, err := s.st.GateTokenRevoke(ctx, pathUUID(c, "companyId"), pathUUID(c, "id"), s.now())
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, t, nil
}

// grantTemplate returns, before a checkout or claim, what names the
// workspace of a grant to the call's run: the branch template and issue
// prefix of the calling agent's company, from the cache when it read them
// less than templateTTL ago (RULES.md G5). ("", "", nil) when the call
// names no run of an agent (the board's checkout takes no lock). Read
// first, so that a failed read leaves nothing checked out.
func (s *Server) grantTemplate(ctx context.Context, c *call) (tmpl, prefix string, err error) {
	if c.runID == "" || c.who.agent == nil {
		return "", "", nil
	}
	id := c.who.agent.CompanyID
	start := time.Now()
	if t, ok := s.templates.get(id, start); ok {
		return t.tmpl, t.prefix, nil
	}
	co, err := s.st.CompanyGet(ctx, id)
	if err != nil {
		return "", "", err
	}
	s.templates.put(id, co, start)
	return co.BranchTemplate, co.IssuePrefix, nil
}

// templateTTL is how long grantTemplate uses a company's template read
// before: a change on another replica reaches this one's workspaces
// within it (one on this replica at once, templateCache.forget). Without
// it every checkout and claim would pay one more database read.
const templateTTL = 2 * time.Second

// templateCache is grantTemplate's cache: company id → template, prefix
// and when their read began. Safe for concurrent use; it holds at most one
// entry per company that checked something out (and one forget time per
// company whose template changed here).
type templateCache struct {
	m      sync.Map // company id → cachedTemplate
	forgot sync.Map // company id → time.Time of its last forget
}

type cachedTemplate struct {
	tmpl, prefix string
	read         time.Time
}

// get returns company id's entry when it was read less than templateTTL
// before now.
func (tc *templateCache) get(id string, now time.Time) (cachedTemplate, bool) {
	v, ok := tc.m.Load(id)
	if !ok {
		return cachedTemplate{}, false
	}
	t := v.(cachedTemplate)
	return t, now.Sub(t.read) < templateTTL
}

// put records co's template and prefix as read by a read that began at
// start, unless the entry was forgotten since start: that read may have
// seen the template before the change that made it forget, and must not
// be reused after it.
func (tc *templateCache) put(id string, co *clasp.Company, start time.Time) {
	if f, ok := tc.forgot.Load(id); ok && !start.After(f.(time.Time)) {
		return
	}
	tc.m.Store(id, cachedTemplate{tmpl: co.BranchTemplate, prefix: co.IssuePrefix, read: start})
}

// forget drops company id's entry after a change of its template made
// through this server, and keeps reads that began before now from
// storing what they saw.
func (tc *templateCache) forget(id string, now time.Time) {
	tc.forgot.Store(id, now)
	tc.m.Delete(id)
}

// withWorkspace returns the answer of a checkout or claim: when the call's
// run holds iss, a copy carrying the workspace of that hold (the branch
// the company's template tmpl names for the issue, with issue prefix
// prefix, and the stamp of its epoch, RULES.md G5); iss itself otherwise
// (the board's checkout takes no lock). The store's issue may be shared
// by the answers of concurrent checkouts: it is never changed.
func withWorkspace(c *call, iss *clasp.Issue, tmpl, prefix string) *clasp.Issue {
	if c.runID == "" || iss.CheckoutRunID == nil || *iss.CheckoutRunID != c.runID {
		return iss
	}
	out := *iss
	out.Workspace = clasp.WorkspaceFor(tmpl, prefix, iss.Identifier, iss.CheckoutEpoch)
	return &out
}
