package cli

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// Tables name agents, issues, companies and operators the way a person
// knows them (alpha, ACME-5, ACME) where the API answers ids. A names
// learns those names with a few requests per command (one agent list per
// company, one company list, one operator token list, and issues one by
// one or, past a few, by listing their company's issues), and forgets
// nothing for as long as it lives. A name it cannot learn (a failed
// request, a credential that may not read it, an id it does not know)
// leaves the id: naming never fails a command. --json prints the API's
// answers unchanged and needs no names.

// maxIssueLookups bounds the issues one names fetches one by one; past it,
// an issue of a known company is named by listing that company's issues.
const maxIssueLookups = 100

// issueLookupsBeforeList is how many issues of one company a names
// fetches one by one before it lists that company's issues instead: one
// list of up to maxLimit rows costs about what one look-up does.
const issueLookupsBeforeList = 10

// maxListedIssues bounds the issues one list of a company's issues reads
// (pages of maxLimit rows); a larger company's other issues keep their ids
// unless looked up one by one.
const maxListedIssues = 10 * maxLimit

// agentRefetchEvery is how soon, in a long-lived command, an agent id a
// company's agent list lacks (an agent created since) may list that
// company's agents again; an issue id likewise may list its company's
// issues again.
const agentRefetchEvery = 5 * time.Second

// names maps ids to the names tables show; the zero value (or nil) names
// nothing and leaves every id. It is not safe for concurrent use.
type names struct {
	c *client.Client
	// operator is whether the credential is an operator's, which may list
	// companies and (an admin's) operator tokens; an agent's may not.
	operator bool
	// refetch is how soon an unknown agent id may list its company's
	// agents again; 0 lists each company's agents once.
	refetch time.Duration
	now     func() time.Time

	agents        map[string]string    // agent id → name
	agentsFetched map[string]time.Time // company id → when its agents were listed
	issues        map[string]string    // issue id → identifier
	issueTried    map[string]bool      // issue ids looked up one by one
	issueLookups  int                  // look-ups one by one, of every company
	lookupsSince  map[string]int       // company id → look-ups one by one since its issues were listed
	issuesListed  map[string]time.Time // company id → when its issues were listed
	companies     map[string]string    // company id → issue prefix
	prefixTried   map[string]bool      // company ids whose prefix was read from one issue
	companiesDone bool
	operators     map[string]string // operator token id → name
	operatorsDone bool
}

// names returns a names that asks the server with the caller's credential
// (without a run: naming needs none); refetch is as in names.refetch.
func (a *app) names(refetch time.Duration) *names {
	return &names{c: a.meClient(), operator: !isAgentToken(a.bearer()), refetch: refetch, now: time.Now,
		agents: map[string]string{}, agentsFetched: map[string]time.Time{}, issues: map[string]string{},
		issueTried: map[string]bool{}, lookupsSince: map[string]int{}, issuesListed: map[string]time.Time{},
		companies: map[string]string{}, prefixTried: map[string]bool{}, operators: map[string]string{}}
}

// learnAgents lists the agents of companyID, unless it did so already
// (and, with refetch, unless id is unknown and the last list is older
// than refetch). id is the agent whose name is wanted, "" for none.
func (n *names) learnAgents(ctx context.Context, companyID, id string) {
	if n == nil || n.c == nil || companyID == "" {
		return
	}
	if _, ok := n.agents[id]; ok && id != "" {
		return
	}
	if at, ok := n.agentsFetched[companyID]; ok && (id == "" || n.refetch == 0 || n.now().Sub(at) < n.refetch) {
		return
	}
	n.agentsFetched[companyID] = n.now()
	p, err := n.c.AgentList(ctx, companyID, client.ListParams{Limit: maxLimit})
	if err != nil {
		return
	}
	ags, err := p.All(ctx)
	if err != nil {
		return
	}
	for _, ag := range ags {
		n.agents[ag.ID] = ag.Name
	}
}

// learnIssues learns the identifiers of issues ids of company companyID
// ("" when unknown): when more of them are unknown than
// issueLookupsBeforeList, it lists the company's issues first, then looks
// up one by one (learnIssue) those still unknown.
func (n *names) learnIssues(ctx context.Context, companyID string, ids []string) {
	if n == nil || n.c == nil {
		return
	}
	unknown := 0
	for _, id := range ids {
		if id != "" && n.issues[id] == "" && !n.issueTried[id] {
			unknown++
		}
	}
	if companyID != "" && unknown > issueLookupsBeforeList {
		n.listIssues(ctx, companyID)
	}
	for _, id := range ids {
		n.learnIssue(ctx, companyID, id)
	}
}

// learnIssue learns the identifier of issue id of company companyID (""
// when unknown) unless it knows it: by listing the company's issues when
// issueLookupsBeforeList of them were looked up one by one since the last
// list, or when maxIssueLookups look-ups of every company are spent (in a
// long-lived command, at most every refetch), else by looking it up, once
// per id and at most maxIssueLookups times in all.
func (n *names) learnIssue(ctx context.Context, companyID, id string) {
	if n == nil || n.c == nil || id == "" || n.issues[id] != "" {
		return
	}
	if companyID != "" && (n.lookupsSince[companyID] >= issueLookupsBeforeList || n.issueLookups >= maxIssueLookups) {
		n.listIssues(ctx, companyID)
		if n.issues[id] != "" {
			return
		}
	}
	if n.issueTried[id] || n.issueLookups >= maxIssueLookups {
		return
	}
	n.issueTried[id] = true
	n.issueLookups++
	if companyID != "" {
		n.lookupsSince[companyID]++
	}
	if iss, err := n.c.IssueGet(ctx, id); err == nil {
		n.knowIssue(iss.CompanyID, iss.ID, iss.Identifier)
	}
}

// listIssues lists the issues of companyID (up to maxListedIssues), unless
// it did so already (with refetch, less than refetch ago).
func (n *names) listIssues(ctx context.Context, companyID string) {
	if at, ok := n.issuesListed[companyID]; ok && (n.refetch == 0 || n.now().Sub(at) < n.refetch) {
		return
	}
	n.issuesListed[companyID] = n.now()
	n.lookupsSince[companyID] = 0
	p, err := n.c.IssueList(ctx, companyID, client.IssueListParams{Limit: maxLimit})
	for read := 0; err == nil; {
		for _, iss := range p.Items {
			n.knowIssue(iss.CompanyID, iss.ID, iss.Identifier)
		}
		if read += len(p.Items); !p.HasNext() || read >= maxListedIssues {
			return
		}
		p, err = p.Next(ctx)
	}
}

// knowIssue records that issue id of company companyID ("" when unknown)
// is identifier (learnt from an answer that carries both), and that the
// company's issue prefix is the identifier's; an empty identifier is
// ignored.
func (n *names) knowIssue(companyID, id, identifier string) {
	if n == nil || id == "" || identifier == "" {
		return
	}
	n.issues[id] = identifier
	if i := strings.LastIndexByte(identifier, '-'); companyID != "" && i > 0 && n.companies[companyID] == "" {
		n.companies[companyID] = identifier[:i]
	}
}

// learnCompanies lists the companies the credential sees, once (an
// operator's credential only: an agent's may not list them).
func (n *names) learnCompanies(ctx context.Context) {
	if n == nil || n.c == nil || n.companiesDone || !n.operator {
		return
	}
	n.companiesDone = true
	p, err := n.c.CompanyListIncludingArchived(ctx, client.ListParams{Limit: maxLimit})
	if err != nil {
		return
	}
	cos, err := p.All(ctx)
	if err != nil {
		return
	}
	for _, co := range cos {
		n.companies[co.ID] = co.IssuePrefix
	}
}

// learnCompany learns the issue prefix of company companyID: with an
// operator's credential by listing the companies (learnCompanies); with
// an agent's, which may not list them, from the identifier of one of the
// company's issues, read once.
func (n *names) learnCompany(ctx context.Context, companyID string) {
	if n == nil || n.c == nil || companyID == "" || n.companies[companyID] != "" {
		return
	}
	if n.operator {
		n.learnCompanies(ctx)
		return
	}
	if n.prefixTried[companyID] {
		return
	}
	n.prefixTried[companyID] = true
	if p, err := n.c.IssueList(ctx, companyID, client.IssueListParams{Limit: 1}); err == nil && len(p.Items) > 0 {
		n.knowIssue(companyID, p.Items[0].ID, p.Items[0].Identifier)
	}
}

// learnOperators lists the operator tokens, once: an admin's credential
// may; for any other operator only its own token (GET
// /api/operators/me) is named.
func (n *names) learnOperators(ctx context.Context) {
	if n == nil || n.c == nil || n.operatorsDone || !n.operator {
		return
	}
	n.operatorsDone = true
	if toks, err := n.c.OperatorTokenList(ctx); err == nil {
		for _, t := range toks {
			n.operators[t.ID] = t.Name
		}
		return
	}
	if me, err := n.c.OperatorMe(ctx); err == nil && me.ID != nil {
		n.operators[*me.ID] = me.Name
	}
}

// learnActivity learns the names the rows as show: their actors, their
// entities, and the issues they name.
func (n *names) learnActivity(ctx context.Context, as []*clasp.Activity) {
	if n == nil {
		return
	}
	issuesOf := map[string][]string{} // company id → the issues the rows are about
	for _, ac := range as {
		switch {
		case ac.EntityType == "issue":
			n.knowIssue(ac.CompanyID, ac.EntityID, detailsIdentifier(ac.Details))
			issuesOf[ac.CompanyID] = append(issuesOf[ac.CompanyID], ac.EntityID)
		case ac.Action == clasp.ActionAgentCreated:
			// A row of a live stream may name an agent newer than the
			// company's agent list; its creation row carries its name.
			if d := createdDetails(ac.Details); d.Name != "" && n.agents[ac.EntityID] == "" {
				n.agents[ac.EntityID] = d.Name
			}
		case ac.Action == clasp.ActionCompanyCreated:
			// The company's prefix, also for a credential that may not
			// list companies.
			if d := createdDetails(ac.Details); d.IssuePrefix != "" && n.companies[ac.EntityID] == "" {
				n.companies[ac.EntityID] = d.IssuePrefix
			}
		}
	}
	for companyID, ids := range issuesOf {
		n.learnIssues(ctx, companyID, ids)
	}
	for _, ac := range as {
		switch ac.ActorType {
		case clasp.ActorAgent:
			n.learnAgents(ctx, ac.CompanyID, ac.ActorID)
		case clasp.ActorBoard:
			if ac.ActorID != "" && ac.ActorID != "board" {
				n.learnOperators(ctx)
			}
		}
		switch ac.EntityType {
		case "agent":
			n.learnAgents(ctx, ac.CompanyID, ac.EntityID)
		case "company":
			n.learnCompany(ctx, ac.EntityID)
		}
	}
}

// createdDetails returns the name and issue prefix the details of an
// agent.created or company.created row carry (empty when they do not).
func createdDetails(details json.RawMessage) (d struct {
	Name        string `json:"name"`
	IssuePrefix string `json:"issuePrefix"`
}) {
	if len(details) > 0 {
		_ = json.Unmarshal(details, &d) // details that are not an object name nothing
	}
	return d
}

// detailsIdentifier returns the "identifier" an activity row's details
// carry (the identifier of its issue), "" when they carry none.
func detailsIdentifier(details json.RawMessage) string {
	var d struct {
		Identifier string `json:"identifier"`
	}
	if len(details) == 0 || json.Unmarshal(details, &d) != nil {
		return ""
	}
	return d.Identifier
}

// detailNames returns, for a view of one thing of company companyID
// (text output only; nil with --json, which needs no names), the names
// of that company's agents, of the company, and of the issues issueIDs
// ("" ignored).
func (a *app) detailNames(ctx context.Context, companyID string, issueIDs ...string) *names {
	if a.jsonOut {
		return nil
	}
	n := a.names(0)
	n.learnDetail(ctx, companyID, issueIDs...)
	return n
}

// issueDetailNames is detailNames for a view of issue iss and its parent;
// iss's own identifier names its company's prefix without a request.
func (a *app) issueDetailNames(ctx context.Context, iss *clasp.Issue) *names {
	if a.jsonOut {
		return nil
	}
	n := a.names(0)
	n.knowIssue(iss.CompanyID, iss.ID, iss.Identifier)
	var parent []string
	if iss.ParentID != nil {
		parent = append(parent, *iss.ParentID)
	}
	n.learnDetail(ctx, iss.CompanyID, parent...)
	return n
}

// learnDetail learns what a view of one thing of company companyID shows:
// the company's agents, the company, and the issues issueIDs.
func (n *names) learnDetail(ctx context.Context, companyID string, issueIDs ...string) {
	n.learnAgents(ctx, companyID, "")
	for _, id := range issueIDs {
		n.learnIssue(ctx, companyID, id)
	}
	n.learnCompany(ctx, companyID)
}

// issueNames is detailNames for a view of issue ref's comments: it reads
// the issue (its company and identifier); nil with --json, and names
// nothing when the issue cannot be read.
func (a *app) issueNames(ctx context.Context, ref string) *names {
	if a.jsonOut {
		return nil
	}
	iss, err := a.meClient().IssueGet(ctx, ref)
	if err != nil {
		return nil
	}
	return a.issueDetailNames(ctx, iss)
}

// runNames is detailNames for a view of run r: its company's agents and
// the issue it was woken for.
func (a *app) runNames(ctx context.Context, r *clasp.Run) *names {
	var issue string
	if r.IssueID != nil {
		issue = *r.IssueID
	}
	return a.detailNames(ctx, r.CompanyID, issue)
}

// withID is a name as a view of one thing shows it: "alpha (<id>)", or
// the id alone when name is the id (no name known).
func withID(name, id string) string {
	if name == id || id == "" {
		return id
	}
	return name + " (" + id + ")"
}

// agent returns the name of agent id, else id.
func (n *names) agent(id string) string {
	if n != nil {
		if name := n.agents[id]; name != "" {
			return name
		}
	}
	return id
}

// issue returns the identifier of issue id, else id.
func (n *names) issue(id string) string {
	if n != nil {
		if ident := n.issues[id]; ident != "" {
			return ident
		}
	}
	return id
}

// company returns the issue prefix of company id, else id.
func (n *names) company(id string) string {
	if n != nil {
		if prefix := n.companies[id]; prefix != "" {
			return prefix
		}
	}
	return id
}

// operatorName returns the name of operator token id, "" when unknown.
func (n *names) operatorName(id string) string {
	if n == nil {
		return ""
	}
	return n.operators[id]
}

// actor names who wrote row ac: "agent alpha", "board", "board ops" (the
// name of the operator token the board acted with, when it is known and
// not "board" itself), "system".
func (n *names) actor(ac *clasp.Activity) string {
	switch ac.ActorType {
	case clasp.ActorAgent:
		return "agent " + n.agent(ac.ActorID)
	case clasp.ActorBoard:
		if name := n.operatorName(ac.ActorID); name != "" && !strings.EqualFold(name, "board") {
			return "board " + name
		}
	}
	return string(ac.ActorType)
}

// entity names what row ac is about: "issue ACME-5", "agent alpha",
// "company ACME", "run <id>".
func (n *names) entity(ac *clasp.Activity) string {
	id := ac.EntityID
	switch ac.EntityType {
	case "issue":
		id = n.issue(id)
	case "agent":
		id = n.agent(id)
	case "company":
		id = n.company(id)
	}
	return ac.EntityType + " " + id
}
