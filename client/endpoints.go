package client

import (
	"context"
	"net/http"

	"github.com/clasp-dev/clasp"
)

// This file has one method per endpoint of the API (docs/api.md).
// Issue references ({id} of /issues/{id}) are a UUID or an identifier such
// as "ENG-12" (case-insensitive). Every error from the server is a
// *clasp.Error with Status set; the codes each call can answer are those of
// RULES.md (401 unauthenticated for any bad credential, 404
// not_found for anything not visible to the caller).

// CompanyCreate creates a company (board). 409 already_exists if the issue
// prefix is taken; 400 invalid_request for a bad prefix.
func (c *Client) CompanyCreate(ctx context.Context, req CompanyCreateRequest) (*clasp.Company, error) {
	var out clasp.Company
	if _, err := c.do(ctx, request{method: http.MethodPost, path: "/api/companies", body: req}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CompanyUpdate changes a company's name, branch template or escalation
// setting (an admin of the company); the fields of req left nil are kept.
// 400 invalid_request naming the field (an empty name, a template without
// {identifier} or that makes no valid git branch name, a setting out of
// 0..100); 404 not_found.
func (c *Client) CompanyUpdate(ctx context.Context, id string, req CompanyUpdateRequest) (*clasp.Company, error) {
	var out clasp.Company
	if _, err := c.do(ctx, request{method: http.MethodPatch, path: pathf("/api/companies/%s", id), body: req}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CompanyList returns the first page of companies (board), oldest first.
func (c *Client) CompanyList(ctx context.Context, p ListParams) (*Page[*clasp.Company], error) {
	return getPage[*clasp.Company](ctx, c, request{method: http.MethodGet, path: "/api/companies", query: p.values()})
}

// CompanyListIncludingArchived is CompanyList with the archived companies
// too (GET /api/companies?includeArchived=true).
func (c *Client) CompanyListIncludingArchived(ctx context.Context, p ListParams) (*Page[*clasp.Company], error) {
	q := p.values()
	q.Set("includeArchived", "true")
	return getPage[*clasp.Company](ctx, c, request{method: http.MethodGet, path: "/api/companies", query: q})
}

// CompanyArchive archives a company (an admin's): it is left out of
// CompanyList and the board's picker; its agents, issues and runs stay as
// they are. Archiving an archived company changes nothing. 404 not_found.
func (c *Client) CompanyArchive(ctx context.Context, id string) (*clasp.Company, error) {
	var out clasp.Company
	if _, err := c.do(ctx, request{method: http.MethodPost, path: pathf("/api/companies/%s/archive", id)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CompanyUnarchive restores an archived company to the list (an admin's).
// 404 not_found.
func (c *Client) CompanyUnarchive(ctx context.Context, id string) (*clasp.Company, error) {
	var out clasp.Company
	if _, err := c.do(ctx, request{method: http.MethodPost, path: pathf("/api/companies/%s/unarchive", id)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CompanyGet returns a company (board). 404 not_found.
func (c *Client) CompanyGet(ctx context.Context, id string) (*clasp.Company, error) {
	var out clasp.Company
	if _, err := c.do(ctx, request{method: http.MethodGet, path: pathf("/api/companies/%s", id)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AgentCreate creates an active agent in a company (board). 409
// already_exists if the name key is taken in the company.
func (c *Client) AgentCreate(ctx context.Context, companyID string, req AgentCreateRequest) (*clasp.Agent, error) {
	var out clasp.Agent
	if _, err := c.do(ctx, request{method: http.MethodPost, path: pathf("/api/companies/%s/agents", companyID), body: req}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AgentList returns the first page of a company's agents (board).
func (c *Client) AgentList(ctx context.Context, companyID string, p ListParams) (*Page[*clasp.Agent], error) {
	return getPage[*clasp.Agent](ctx, c, request{method: http.MethodGet, path: pathf("/api/companies/%s/agents", companyID), query: p.values()})
}

// AgentGet returns an agent (board). 404 not_found.
func (c *Client) AgentGet(ctx context.Context, id string) (*clasp.Agent, error) {
	var out clasp.Agent
	if _, err := c.do(ctx, request{method: http.MethodGet, path: pathf("/api/agents/%s", id)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AgentUpdate changes an agent (board), e.g. its status: paused, active, or
// terminated (which revokes its keys).
func (c *Client) AgentUpdate(ctx context.Context, id string, req AgentUpdateRequest) (*clasp.Agent, error) {
	var out clasp.Agent
	if _, err := c.do(ctx, request{method: http.MethodPatch, path: pathf("/api/agents/%s", id), body: req}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AgentKeyCreate creates an API key for an agent (board). The answer's Token
// is the secret, returned this once.
func (c *Client) AgentKeyCreate(ctx context.Context, agentID string) (*clasp.APIKey, error) {
	var out clasp.APIKey
	if _, err := c.do(ctx, request{method: http.MethodPost, path: pathf("/api/agents/%s/keys", agentID), body: struct{}{}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AgentKeyRevoke revokes an agent's key (board); revoking a revoked key
// answers it unchanged. 404 not_found. The returned key is nil if the
// server answers 204 No Content.
func (c *Client) AgentKeyRevoke(ctx context.Context, agentID, keyID string) (*clasp.APIKey, error) {
	var out *clasp.APIKey
	if _, err := c.do(ctx, request{method: http.MethodDelete, path: pathf("/api/agents/%s/keys/%s", agentID, keyID)}, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// AgentKeyList lists an agent's API keys (board), never their secrets.
func (c *Client) AgentKeyList(ctx context.Context, agentID string) ([]*clasp.APIKey, error) {
	var out []*clasp.APIKey
	if _, err := c.do(ctx, request{method: http.MethodGet, path: pathf("/api/agents/%s/keys", agentID)}, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Me returns the calling agent (agent credential). 401 unauthenticated.
func (c *Client) Me(ctx context.Context) (*clasp.Agent, error) {
	var out clasp.Agent
	if _, err := c.do(ctx, request{method: http.MethodGet, path: "/api/agents/me"}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Inbox returns the calling agent's open assigned issues (todo, in_progress,
// blocked), most urgent first (GET /api/agents/me/inbox-lite).
func (c *Client) Inbox(ctx context.Context) ([]*clasp.InboxItem, error) {
	var out []*clasp.InboxItem
	if _, err := c.do(ctx, request{method: http.MethodGet, path: "/api/agents/me/inbox-lite"}, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// RunOpen opens a self-reported run for the calling agent: running, with a
// lease of the server's TTL. The answer's RunToken is a credential bound to
// the run (use it with WithToken, or use WithRun with the agent key). Sends
// the context's Idempotency-Key (see WithIdempotencyKey).
func (c *Client) RunOpen(ctx context.Context, req RunOpenRequest) (*clasp.Run, error) {
	var out clasp.Run
	if _, err := c.do(ctx, request{method: http.MethodPost, path: "/api/agents/me/runs", body: req, idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RunHeartbeat renews a run's lease (the run's agent). 409 run_not_live if
// the run is terminal or lost.
func (c *Client) RunHeartbeat(ctx context.Context, runID string) (*clasp.Run, error) {
	var out clasp.Run
	if _, err := c.do(ctx, request{method: http.MethodPost, path: pathf("/api/runs/%s/heartbeat", runID), body: struct{}{}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RunFinish ends a run (the run's agent, or the board) and releases every
// lock naming it (rule L6). 409 run_not_live if it already ended.
func (c *Client) RunFinish(ctx context.Context, runID string, req RunFinishRequest) (*clasp.Run, error) {
	var out clasp.Run
	if _, err := c.do(ctx, request{method: http.MethodPost, path: pathf("/api/runs/%s/finish", runID), body: req}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RunGet returns a run. 404 not_found.
func (c *Client) RunGet(ctx context.Context, runID string) (*clasp.Run, error) {
	var out clasp.Run
	if _, err := c.do(ctx, request{method: http.MethodGet, path: pathf("/api/runs/%s", runID)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RunList returns the first page of a company's runs, newest first.
func (c *Client) RunList(ctx context.Context, companyID string, p RunListParams) (*Page[*clasp.Run], error) {
	return getPage[*clasp.Run](ctx, c, request{method: http.MethodGet, path: pathf("/api/companies/%s/runs", companyID), query: p.values()})
}

// IssueCreate creates an issue with the company's next identifier (201).
// Sends the context's Idempotency-Key (see WithIdempotencyKey).
func (c *Client) IssueCreate(ctx context.Context, companyID string, req IssueCreateRequest) (*clasp.Issue, error) {
	var out clasp.Issue
	if _, err := c.do(ctx, request{method: http.MethodPost, path: pathf("/api/companies/%s/issues", companyID), body: req, idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// IssueList returns the first page of a company's issues, newest first;
// follow Page.Next (or Page.All) for the rest.
func (c *Client) IssueList(ctx context.Context, companyID string, p IssueListParams) (*Page[*clasp.Issue], error) {
	return getPage[*clasp.Issue](ctx, c, request{method: http.MethodGet, path: pathf("/api/companies/%s/issues", companyID), query: p.values()})
}

// IssueGet returns an issue by UUID or identifier. 404 not_found.
func (c *Client) IssueGet(ctx context.Context, ref string) (*clasp.Issue, error) {
	var out clasp.Issue
	if _, err := c.do(ctx, request{method: http.MethodGet, path: pathf("/api/issues/%s", ref)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// IssueUpdate PATCHes an issue (rules L5, L6): 409 ownership_conflict when
// another live run holds it; 422 precondition_failed when an agent moves it
// to in_progress (use checkout); 422 blocked_by_unresolved when it would
// enter done (or in_progress) while a blocker is not done; 422
// dependency_cycle when its new blockers or parent would close a cycle.
// Sends the context's Idempotency-Key (see
// WithIdempotencyKey) and, only then, retries after connection errors: a
// repeat of the same PATCH with the same key is applied once (422
// idempotency_key_reused for the same key with another body).
func (c *Client) IssueUpdate(ctx context.Context, ref string, req IssueUpdateRequest) (*clasp.Issue, error) {
	var out clasp.Issue
	if _, err := c.do(ctx, request{method: http.MethodPatch, path: pathf("/api/issues/%s", ref), body: req, idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// IssueCheckout takes the issue's lock for the client's run (rules L1-L3)
// and answers the issue with its new CheckoutEpoch. 409 checkout_conflict
// with details {issueId, status, assigneeAgentId, checkoutRunId,
// executionRunId, reason}; 403 agent_mismatch; 422 precondition_failed when
// a closed status is expected. See CheckoutWithRetry.
func (c *Client) IssueCheckout(ctx context.Context, ref string, req CheckoutRequest) (*clasp.Issue, error) {
	var out clasp.Issue
	if _, err := c.do(ctx, request{method: http.MethodPost, path: pathf("/api/issues/%s/checkout", ref), body: req}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Claim checks out, for the client's run, the most urgent issue the agent
// may take under rule L1 (priority, then age) and answers it with its new
// CheckoutEpoch; a nil issue and nil error when none is eligible (204).
// Concurrent claimers never conflict: each gets a different issue. 400
// invalid_request (scope, expectedStatuses); 401 run_id_required without a
// run. Not retried on connection errors: a lost answer leaves the issue
// held by the run until the run ends or releases it.
func (c *Client) Claim(ctx context.Context, req ClaimRequest) (*clasp.Issue, error) {
	var out *clasp.Issue
	if _, err := c.do(ctx, request{method: http.MethodPost, path: "/api/agents/me/claim", body: req}, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// IssueRelease releases the issue's lock (rule L4): in_progress becomes
// todo, the assignee stays unless req.Unassign. 409 ownership_conflict for
// a live non-holder.
func (c *Client) IssueRelease(ctx context.Context, ref string, req ReleaseRequest) (*clasp.Issue, error) {
	var out clasp.Issue
	if _, err := c.do(ctx, request{method: http.MethodPost, path: pathf("/api/issues/%s/release", ref), body: req}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// IssueForceRelease clears every lock of the issue (board only, audited).
// 403 forbidden for agents.
func (c *Client) IssueForceRelease(ctx context.Context, ref string, req ForceReleaseRequest) (*clasp.Issue, error) {
	var out clasp.Issue
	if _, err := c.do(ctx, request{method: http.MethodPost, path: pathf("/api/issues/%s/admin/force-release", ref), body: req}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CommentCreate adds a comment to an issue of the caller's company (201).
// Sends the context's Idempotency-Key (see WithIdempotencyKey).
func (c *Client) CommentCreate(ctx context.Context, ref string, req CommentCreateRequest) (*clasp.Comment, error) {
	var out clasp.Comment
	if _, err := c.do(ctx, request{method: http.MethodPost, path: pathf("/api/issues/%s/comments", ref), body: req, idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CommentList returns an issue's comments written after p.After (all of
// them when empty), oldest first (newest first with p.Order "desc"). It follows the server's Link rel="next" pages, so it
// returns every such comment; p.Limit is the page size.
func (c *Client) CommentList(ctx context.Context, ref string, p CommentListParams) ([]*clasp.Comment, error) {
	first, err := getPage[*clasp.Comment](ctx, c, request{method: http.MethodGet, path: pathf("/api/issues/%s/comments", ref), query: p.values()})
	if err != nil {
		return nil, err
	}
	return first.All(ctx)
}

// IssueActivity returns the first page of an issue's audit trail, newest first.
func (c *Client) IssueActivity(ctx context.Context, ref string, p ActivityListParams) (*Page[*clasp.Activity], error) {
	return getPage[*clasp.Activity](ctx, c, request{method: http.MethodGet, path: pathf("/api/issues/%s/activity", ref), query: p.values()})
}

// CompanyActivity returns the first page of a company's audit trail, newest
// first, filtered by p.Action and p.EntityID.
func (c *Client) CompanyActivity(ctx context.Context, companyID string, p ActivityListParams) (*Page[*clasp.Activity], error) {
	return getPage[*clasp.Activity](ctx, c, request{method: http.MethodGet, path: pathf("/api/companies/%s/activity", companyID), query: p.values()})
}

// Healthz checks that the server process answers (GET /healthz).
func (c *Client) Healthz(ctx context.Context) error {
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/healthz"}, nil)
	return err
}

// Readyz checks that the server reaches its database (GET /readyz); a 503
// answer is returned as a *clasp.Error.
func (c *Client) Readyz(ctx context.Context) error {
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/readyz"}, nil)
	return err
}
