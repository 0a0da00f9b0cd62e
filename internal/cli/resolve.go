package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// Company and agent flags take an id, or what a person remembers: a
// company's issue prefix or name, an agent's name (each compared without
// regard to case). The CLI resolves them to ids before it sends a request:
// companies through GET /api/companies (an operator token), or, for an
// agent's credential, its own company (GET /api/agents/me); agents through
// the agent list of the company they are looked up in.

// isAgentToken reports whether tok is an agent's credential (an API key or
// a run token), which acts in its own company only.
func isAgentToken(tok string) bool {
	return strings.HasPrefix(tok, "clasp_ak_") || strings.HasPrefix(tok, "clasp_rt_")
}

func isUUID(s string) bool {
	_, err := uuid.Parse(s)
	return err == nil && len(s) == 36
}

// visibleCompanies lists every company the operator credential sees,
// archived ones included (a person may name one to restore it).
func (a *app) visibleCompanies(ctx context.Context, c *client.Client) ([]*clasp.Company, error) {
	p, err := c.CompanyListIncludingArchived(ctx, client.ListParams{Limit: maxLimit})
	if err != nil {
		return nil, fmt.Errorf("list the companies: %w", err)
	}
	return p.All(ctx)
}

// describeCompanies is "ACME (Acme, <id>), BETA (Beta Labs, <id>)".
func describeCompanies(cos []*clasp.Company) string {
	parts := make([]string, len(cos))
	for i, co := range cos {
		parts[i] = fmt.Sprintf("%s (%s, %s)", co.IssuePrefix, co.Name, co.ID)
	}
	return strings.Join(parts, ", ")
}

// resolveCompany returns the id of the company ref names (an id, an issue
// prefix or a name) among those the caller sees; from is the flag or
// variable ref came from, for messages.
func (a *app) resolveCompany(ctx context.Context, ref, from string) (string, error) {
	ref = strings.TrimSpace(ref)
	if isUUID(ref) {
		return ref, nil
	}
	if isAgentToken(a.bearer()) {
		// An agent sees its own company only, and may not read it: its
		// issues' identifiers carry the prefix.
		me, err := a.meClient().Me(ctx)
		if err != nil {
			return "", fmt.Errorf("find the company of the calling agent: %w", err)
		}
		p, err := a.meClient().IssueList(ctx, me.CompanyID, client.IssueListParams{Limit: 1})
		if err != nil {
			return "", fmt.Errorf("find the company of the calling agent: %w", err)
		}
		if len(p.Items) == 0 {
			return me.CompanyID, nil // nothing to tell it by; an agent acts in its own company only
		}
		prefix, _, _ := strings.Cut(p.Items[0].Identifier, "-")
		if strings.EqualFold(prefix, ref) {
			return me.CompanyID, nil
		}
		return "", usageErr(fmt.Errorf("%s %q is not the calling agent's company (prefix %s, id %s), the only one an agent's credential acts in: leave %s out, or pass %s", from, ref, prefix, me.CompanyID, from, prefix))
	}
	cos, err := a.visibleCompanies(ctx, a.meClient())
	if err != nil {
		return "", err
	}
	var byPrefix, byName []*clasp.Company
	for _, co := range cos {
		if strings.EqualFold(co.IssuePrefix, ref) {
			byPrefix = append(byPrefix, co)
		}
		if strings.EqualFold(strings.TrimSpace(co.Name), ref) {
			byName = append(byName, co)
		}
	}
	switch {
	case len(byPrefix) == 1:
		return byPrefix[0].ID, nil
	case len(byName) == 1:
		return byName[0].ID, nil
	case len(byName) > 1:
		return "", usageErr(fmt.Errorf("%s %q names %d companies: %s; pass one's prefix or id", from, ref, len(byName), describeCompanies(byName)))
	case len(cos) == 0:
		return "", usageErr(fmt.Errorf("%s %q: there is no company yet (clasp company create NAME)", from, ref))
	}
	return "", usageErr(fmt.Errorf("%s %q is no company's id, prefix or name; the companies: %s", from, ref, describeCompanies(cos)))
}

// resolveAgent returns the id of the agent ref names (an id, or a name)
// in companyID, or, when that is "", in the caller's companies (an
// agent's own; every company an operator sees). flag is the flag or
// argument name, for messages. "" stays "".
func (a *app) resolveAgent(ctx context.Context, companyID, ref, flag string) (string, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" || isUUID(ref) {
		return ref, nil
	}
	c := a.meClient()
	var companies []string
	switch {
	case companyID != "":
		companies = []string{companyID}
	case isAgentToken(a.bearer()):
		me, err := c.Me(ctx)
		if err != nil {
			return "", fmt.Errorf("find the company of the calling agent: %w", err)
		}
		companies = []string{me.CompanyID}
	default:
		cos, err := a.visibleCompanies(ctx, c)
		if err != nil {
			return "", err
		}
		for _, co := range cos {
			companies = append(companies, co.ID)
		}
	}
	var found []*clasp.Agent
	for _, cid := range companies {
		p, err := c.AgentList(ctx, cid, client.ListParams{Limit: maxLimit})
		if err != nil {
			return "", fmt.Errorf("list the agents of company %s: %w", cid, err)
		}
		ags, err := p.All(ctx)
		if err != nil {
			return "", fmt.Errorf("list the agents of company %s: %w", cid, err)
		}
		for _, ag := range ags {
			if strings.EqualFold(ag.Name, ref) {
				found = append(found, ag)
			}
		}
	}
	if len(found) == 1 {
		return found[0].ID, nil
	}
	// The refusal names companies by their issue prefix where the
	// credential may read it.
	n := a.names(0)
	if len(found) == 0 {
		where := "in any company you see"
		if len(companies) == 1 {
			n.learnCompany(ctx, companies[0])
			where = "in company " + n.company(companies[0])
		}
		return "", usageErr(fmt.Errorf("%s %q: no agent has that name %s (clasp agent list shows them); pass an agent id or name", flag, ref, where))
	}
	parts := make([]string, len(found))
	for i, ag := range found {
		n.learnCompany(ctx, ag.CompanyID)
		parts[i] = fmt.Sprintf("%s in company %s", ag.ID, n.company(ag.CompanyID))
	}
	return "", usageErr(fmt.Errorf("%s %q names %d agents: %s; pass the id of the one you mean instead of the name", flag, ref, len(found), strings.Join(parts, ", ")))
}
