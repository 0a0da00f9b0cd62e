package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// companyCreateIn is the body of POST /api/companies.
type companyCreateIn struct {
	Name           *string `json:"name"`
	IssuePrefix    *string `json:"issuePrefix"`
	BranchTemplate *string `json:"branchTemplate"`
	// EscalateAfterFailures is the company's escalation setting (RULES.md
	// E1); absent: 3.
	EscalateAfterFailures *int `json:"escalateAfterFailures"`
}

// companyCompat are the fields of Paperclip's company create that clasp
// does not model.
var companyCompat = map[string]compatField{
	"description":                      {concept: "clasp has no company descriptions"},
	"budgetMonthlyCents":               {concept: "clasp has no budgets", def: "0"},
	"requireBoardApprovalForNewAgents": {concept: "clasp has no approvals", def: "false"},
	"brandColor":                       {concept: "clasp has no company branding"},
}

func (in *companyCreateIn) compatFields() map[string]compatField { return companyCompat }

func (in *companyCreateIn) validate() error {
	if err := requiredText("name", in.Name, maxNameLen); err != nil {
		return err
	}
	if in.BranchTemplate != nil {
		if err := clasp.ValidateBranchTemplate(*in.BranchTemplate); err != nil {
			return err
		}
	}
	if in.IssuePrefix == nil {
		return nil // derived from the name (companyCreate)
	}
	if !clasp.ValidIssuePrefix(*in.IssuePrefix) {
		return clasp.InvalidField("issuePrefix", "Field \"issuePrefix\" must be 2 to 10 upper-case letters A-Z, not %q.", truncate(*in.IssuePrefix, 32))
	}
	return nil
}

// companyCreate: POST /api/companies (board). 201 company; 409
// already_exists for a given issuePrefix that is taken. Without
// issuePrefix, as Paperclip does, one is derived from the name
// (clasp.IssuePrefixCandidates): the first candidate no other company has,
// decided by the store's unique prefix, so concurrent creates never share
// one.
func (s *Server) companyCreate(ctx context.Context, c *call, in *companyCreateIn) (int, any, error) {
	if in.IssuePrefix != nil {
		co, err := s.st.CompanyCreate(ctx, &store.CompanyCreateParams{Name: *in.Name, IssuePrefix: *in.IssuePrefix, BranchTemplate: valueOr(in.BranchTemplate),
			EscalateAfterFailures: in.EscalateAfterFailures, Actor: c.actor()})
		if err != nil {
			return 0, nil, err
		}
		return http.StatusCreated, co, nil
	}
	for _, prefix := range clasp.IssuePrefixCandidates(*in.Name) {
		co, err := s.st.CompanyCreate(ctx, &store.CompanyCreateParams{Name: *in.Name, IssuePrefix: prefix, BranchTemplate: valueOr(in.BranchTemplate),
			EscalateAfterFailures: in.EscalateAfterFailures, Actor: c.actor()})
		if clasp.ErrorCode(err) == clasp.CodeAlreadyExists {
			continue
		}
		if err != nil {
			return 0, nil, err
		}
		return http.StatusCreated, co, nil
	}
	return 0, nil, clasp.Errorf(clasp.CodeAlreadyExists, "Every issue prefix derived from %q is taken; send issuePrefix.", truncate(*in.Name, 64)).
		WithDetails("field", "issuePrefix")
}

// companyList: GET /api/companies (board), oldest first, paged; archived
// companies only with ?includeArchived=true (400 for a value that is no
// boolean).
func (s *Server) companyList(ctx context.Context, c *call) (int, any, error) {
	p, err := pageParams(c.r.URL.Query())
	if err != nil {
		return 0, nil, err
	}
	includeArchived := false
	q := c.r.URL.Query()
	if n := len(q["includeArchived"]); n > 1 {
		return 0, nil, clasp.InvalidField("includeArchived", "Query parameter includeArchived is given %d times; give it once.", n)
	}
	if v := q.Get("includeArchived"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return 0, nil, clasp.InvalidField("includeArchived", "Query parameter includeArchived must be true or false, not %q.", truncate(v, 32))
		}
		includeArchived = b
	}
	if scope := c.who.company(); scope != "" {
		// A company-scoped operator's list is its company alone, left
		// out as any archived one is.
		co, err := s.st.CompanyGet(ctx, scope)
		if err != nil {
			return 0, nil, err
		}
		if co.ArchivedAt != nil && !includeArchived {
			return http.StatusOK, []*clasp.Company{}, nil
		}
		return http.StatusOK, []*clasp.Company{co}, nil
	}
	items, next, err := s.st.CompanyList(ctx, p, includeArchived)
	if err != nil {
		return 0, nil, err
	}
	setNextLink(c, "cursor", next)
	return http.StatusOK, list(items), nil
}

// companyArchive: POST /api/companies/{companyId}/archive (archive true)
// and .../unarchive (false), an admin's: the company as it is now. Asking
// for the state it is in changes nothing. 404 not_found.
func (s *Server) companyArchive(archive bool) func(ctx context.Context, c *call) (int, any, error) {
	return func(ctx context.Context, c *call) (int, any, error) {
		co, err := s.st.CompanyArchive(ctx, &store.CompanyArchiveParams{ID: pathUUID(c, "companyId"), Archive: archive, Actor: c.actor()})
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, co, nil
	}
}

// companyGet: GET /api/companies/{companyId} (board). 404 not_found.
func (s *Server) companyGet(ctx context.Context, c *call) (int, any, error) {
	id := pathUUID(c, "companyId")
	co, err := s.st.CompanyGet(ctx, id)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, co, nil
}

// companyUpdateIn is the body of PATCH /api/companies/{companyId}.
type companyUpdateIn struct {
	Name           *string `json:"name"`
	BranchTemplate *string `json:"branchTemplate"`
	// EscalateAfterFailures is the company's escalation setting (RULES.md
	// E1): 0 never escalates, at most clasp.MaxEscalateAfterFailures.
	EscalateAfterFailures *int `json:"escalateAfterFailures"`
}

func (in *companyUpdateIn) validate() error {
	if in.Name == nil && in.BranchTemplate == nil && in.EscalateAfterFailures == nil {
		return clasp.InvalidField("name", "Nothing to change: send at least one of \"name\", \"branchTemplate\" and \"escalateAfterFailures\".")
	}
	if in.Name != nil {
		if err := requiredText("name", in.Name, maxNameLen); err != nil {
			return err
		}
	}
	if in.BranchTemplate != nil {
		return clasp.ValidateBranchTemplate(*in.BranchTemplate)
	}
	return nil
}

// companyUpdate: PATCH /api/companies/{companyId} (admin of the company)
// {name?, branchTemplate?, escalateAfterFailures?}: 200 the company,
// audited as company.updated {changes} when something changed. The branch
// template names the workspace branch of every later grant (RULES.md G5)
// and the branches on which the gate refuses unstamped commits (G3); the
// escalation setting counts failed runs in a row (E1). 400
// invalid_request naming the field (an empty body, an empty name, a
// template without {identifier}, with another placeholder, or that makes
// no valid git branch name, a setting out of 0..100); 404 not_found.
func (s *Server) companyUpdate(ctx context.Context, c *call, in *companyUpdateIn) (int, any, error) {
	co, err := s.st.CompanyUpdate(ctx, &store.CompanyUpdateParams{ID: pathUUID(c, "companyId"), Name: in.Name, BranchTemplate: in.BranchTemplate,
		EscalateAfterFailures: in.EscalateAfterFailures, Actor: c.actor()})
	s.templates.forget(pathUUID(c, "companyId"), time.Now()) // this replica's grants name branches by the new template at once
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, co, nil
}

// companyID returns the {companyId} of a company route, canonical. For the
// board it also checks that the company exists (404 not_found), so that a
// list of a missing company is not an empty list; an agent's own company
// exists (prepare allowed only that one).
func (s *Server) companyID(ctx context.Context, c *call) (string, error) {
	id := pathUUID(c, "companyId")
	if c.who.board {
		if _, err := s.st.CompanyGet(ctx, id); err != nil {
			return "", err
		}
	}
	return id, nil
}

// agentCreateIn is the body of POST /api/companies/{companyId}/agents.
// AdapterType, AdapterConfig and RuntimeConfig are Paperclip's way to say
// how the server runs the agent (paperclipAdapter maps them to clasp's
// process adapter); Adapter is clasp's own form (as in PATCH). At most one
// of the two forms.
type agentCreateIn struct {
	Name          *string         `json:"name"`
	Role          *string         `json:"role"`
	Adapter       json.RawMessage `json:"adapter"`
	AdapterType   *string         `json:"adapterType"`
	AdapterConfig json.RawMessage `json:"adapterConfig"`
	RuntimeConfig json.RawMessage `json:"runtimeConfig"`

	adapter *clasp.AdapterConfig // the decoded adapter of either form, nil for none
}

func (in *agentCreateIn) compatFields() map[string]compatField { return agentCompat }

func (in *agentCreateIn) validate() error {
	if err := firstErr(requiredText("name", in.Name, maxNameLen), optionalText("role", in.Role, maxNameLen)); err != nil {
		return err
	}
	if in.Adapter != nil && (in.AdapterType != nil || in.AdapterConfig != nil || in.RuntimeConfig != nil) {
		return clasp.InvalidField("adapter", "Send either adapter (clasp's form) or adapterType/adapterConfig/runtimeConfig (Paperclip's), not both.")
	}
	var err error
	if in.Adapter != nil {
		in.adapter, err = decodeAdapter(in.Adapter)
		return err
	}
	in.adapter, err = paperclipAdapter(in.AdapterType, in.AdapterConfig, in.RuntimeConfig)
	return err
}

// agentCreate: POST /api/companies/{companyId}/agents (board). 201 the
// agent with its "adapter" (null for none); 404 company; 409
// already_exists for a taken name key. The adapter, validated before
// anything is written, is stored right after the agent.
func (s *Server) agentCreate(ctx context.Context, c *call, in *agentCreateIn) (int, any, error) {
	cid := pathUUID(c, "companyId")
	p := &store.AgentCreateParams{CompanyID: cid, Name: *in.Name, Actor: c.actor()}
	if in.Role != nil {
		p.Role = *in.Role
	}
	if in.adapter != nil {
		if err := adminForAdapter(c); err != nil {
			return 0, nil, err
		}
	}
	hst, _ := s.st.(store.HeartbeatStore)
	if in.adapter != nil && hst == nil {
		return 0, nil, errNoHeartbeat()
	}
	a, err := s.st.AgentCreate(ctx, p)
	if err != nil {
		return 0, nil, err
	}
	if in.adapter != nil {
		if _, err := hst.AgentAdapterSet(ctx, &store.AgentAdapterSetParams{AgentID: a.ID, Config: in.adapter, Actor: c.actor()}); err != nil {
			return 0, nil, prefixField(err, "adapterConfig")
		}
	}
	_, out, err := s.agentAnswer(ctx, a)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, out, nil
}

// agentList: GET /api/companies/{companyId}/agents (board, or an agent of
// the company: Paperclip agents read their colleagues, to delegate), paged.
// The agents carry no keys and no adapter settings.
func (s *Server) agentList(ctx context.Context, c *call) (int, any, error) {
	p, err := pageParams(c.r.URL.Query())
	if err != nil {
		return 0, nil, err
	}
	cid, err := s.companyID(ctx, c)
	if err != nil {
		return 0, nil, err
	}
	items, next, err := s.st.AgentList(ctx, cid, p)
	if err != nil {
		return 0, nil, err
	}
	setNextLink(c, "cursor", next)
	return http.StatusOK, list(items), nil
}

// pathAgentID returns the {id} of an agent route, canonical (prepare
// refused the request unless it is a UUID).
func pathAgentID(c *call) string { return pathUUID(c, "id") }

// agentGet: GET /api/agents/{id} (board: the agent with its "adapter",
// null for none; an agent: an agent of its own company, without adapter
// settings, RULES.md, Actors and credentials). 404 not_found, for an
// agent of another company the very answer of an id that exists nowhere.
func (s *Server) agentGet(ctx context.Context, c *call) (int, any, error) {
	id := pathAgentID(c)
	a, err := s.st.AgentGet(ctx, id)
	if err != nil {
		return 0, nil, err
	}
	if !c.who.board {
		if a.CompanyID != c.who.agent.CompanyID {
			return 0, nil, notVisible("agent", id)
		}
		return http.StatusOK, a, nil
	}
	if !c.sees(a.CompanyID) {
		return 0, nil, notVisible("agent", id)
	}
	return s.agentAnswer(ctx, a)
}

// agentUpdateIn is the body of PATCH /api/agents/{id}.
type agentUpdateIn struct {
	Status *clasp.AgentStatus `json:"status"`
	Name   *string            `json:"name"`
	Role   *string            `json:"role"`
	// Adapter is the process adapter config; JSON null removes it.
	Adapter json.RawMessage `json:"adapter"`

	adapter *clasp.AdapterConfig // Adapter decoded and normalized by validate
}

func (in *agentUpdateIn) validate() error {
	if in.Status == nil && in.Name == nil && in.Role == nil && in.Adapter == nil {
		return clasp.Errorf(clasp.CodeInvalidRequest, "The body changes nothing: send status, name, role or adapter.")
	}
	if in.Adapter != nil {
		c, err := decodeAdapter(in.Adapter)
		if err != nil {
			return err
		}
		in.adapter = c
	}
	if in.Status != nil && !in.Status.Valid() {
		return clasp.InvalidField("status", "Field \"status\" must be one of active, paused, terminated; not %q.", truncate(string(*in.Status), 64))
	}
	if in.Name != nil {
		if err := requiredText("name", in.Name, maxNameLen); err != nil {
			return err
		}
	}
	return optionalText("role", in.Role, maxNameLen)
}

// agentUpdate: PATCH /api/agents/{id} (board; agents never change an
// agent's configuration, RULES.md, Actors and credentials): status (terminating revokes every
// key; pausing also cancels the agent's queued runs), name, role,
// adapter (the process adapter config; null removes it). The adapter is
// validated before anything is written (400 invalid_request naming
// adapter.<field>) and stored first, then status, name and role. 200 the
// agent with its "adapter" (null for none); 404 not_found; 409
// already_exists for a taken name; 422 precondition_failed for an adapter
// of a terminated agent.
func (s *Server) agentUpdate(ctx context.Context, c *call, in *agentUpdateIn) (int, any, error) {
	id := pathAgentID(c)
	if err := s.checkAgentVisible(ctx, c, id); err != nil {
		return 0, nil, err
	}
	hst, _ := s.st.(store.HeartbeatStore)
	if in.Adapter != nil {
		if err := adminForAdapter(c); err != nil {
			return 0, nil, err
		}
		if hst == nil {
			return 0, nil, errNoHeartbeat()
		}
		if _, err := hst.AgentAdapterSet(ctx, &store.AgentAdapterSetParams{AgentID: id, Config: in.adapter, Actor: c.actor()}); err != nil {
			return 0, nil, prefixField(err, "adapter")
		}
	}
	var a *clasp.Agent
	var err error
	if in.Status != nil || in.Name != nil || in.Role != nil {
		a, err = s.st.AgentUpdate(ctx, &store.AgentUpdateParams{AgentID: id, Status: in.Status, Name: in.Name, Role: in.Role, Actor: c.actor()})
		s.creds.forgetAgent(id) // its status, keys and runs may have changed
	} else {
		a, err = s.st.AgentGet(ctx, id)
	}
	if err != nil {
		return 0, nil, err
	}
	if in.Status != nil && *in.Status == clasp.AgentPaused && hst != nil {
		if _, err := hst.AgentCancelQueuedRuns(ctx, id, c.actor()); err != nil {
			return 0, nil, err
		}
	}
	return s.agentAnswer(ctx, a)
}

// emptyIn is the body of endpoints that take none: empty or {}.
type emptyIn struct{}

// keyCreateIn is the body of POST /api/agents/{id}/keys: Paperclip's
// {name, scope}. scope is accepted as null or {"kind": "standard"}.
type keyCreateIn struct {
	Name *string `json:"name"`
}

var keyCompat = map[string]compatField{
	"scope": {concept: "clasp has no scoped keys (every key acts as its agent)", def: `{"kind":"standard"}`},
}

func (in *keyCreateIn) compatFields() map[string]compatField { return keyCompat }

func (in *keyCreateIn) validate() error {
	if in.Name != nil {
		return requiredText("name", in.Name, maxNameLen)
	}
	return nil
}

// agentKeyCreate: POST /api/agents/{id}/keys (board). 201 {id, agentId,
// prefix, name, createdAt, token}: token is the secret, shown this once and
// stored only as its hash; name defaults to "default". 404 for a missing
// agent.
func (s *Server) agentKeyCreate(ctx context.Context, c *call, in *keyCreateIn) (int, any, error) {
	id := pathAgentID(c)
	if err := s.checkAgentVisible(ctx, c, id); err != nil {
		return 0, nil, err
	}
	token, hash := NewToken(TokenAgentKey)
	name := ""
	if in.Name != nil {
		name = strings.TrimSpace(*in.Name)
	}
	k, err := s.st.AgentKeyCreate(ctx, &store.AgentKeyCreateParams{AgentID: id, Prefix: token[:KeyPrefixLen], TokenHash: hash, Name: name, Actor: c.actor()})
	if err != nil {
		return 0, nil, err
	}
	k.Token = token
	return http.StatusCreated, k, nil
}

// agentKeyList: GET /api/agents/{id}/keys (board): the keys, never secrets.
func (s *Server) agentKeyList(ctx context.Context, c *call) (int, any, error) {
	id := pathAgentID(c)
	if a, err := s.st.AgentGet(ctx, id); err != nil {
		return 0, nil, err
	} else if !c.sees(a.CompanyID) {
		return 0, nil, notVisible("agent", id)
	}
	keys, err := s.st.AgentKeyList(ctx, id)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, list(keys), nil
}

// agentKeyRevoke: DELETE /api/agents/{id}/keys/{keyId} (board). 200 key
// (revoking twice answers the key unchanged); 404 for no such key.
func (s *Server) agentKeyRevoke(ctx context.Context, c *call) (int, any, error) {
	id := pathAgentID(c)
	keyID := pathUUID(c, "keyId")
	if err := s.checkAgentVisible(ctx, c, id); err != nil {
		return 0, nil, err
	}
	k, err := s.st.AgentKeyRevoke(ctx, id, keyID, c.actor())
	s.creds.forgetAgent(id)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, k, nil
}

// agentMe: GET /api/agents/me (agent): the calling agent.
func (s *Server) agentMe(ctx context.Context, c *call) (int, any, error) {
	return http.StatusOK, c.who.agent, nil
}

// agentInbox: GET /api/agents/me/inbox-lite (agent): issues assigned to the
// caller with status todo, in_progress or blocked, most urgent first.
func (s *Server) agentInbox(ctx context.Context, c *call) (int, any, error) {
	items, err := s.st.IssueInbox(ctx, c.who.agent.ID)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, list(items), nil
}

// valueOr is *p, or "" for nil.
func valueOr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
