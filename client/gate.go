package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/clasp-dev/clasp"
)

// GateCheckResult is the answer of a gate check: OK when every stamp may
// be written, and one verdict per stamp, in the order asked.
type GateCheckResult struct {
	OK      bool                 `json:"ok"`
	Results []*clasp.GateVerdict `json:"results"`
	// BranchTemplate and IssuePrefix are the gate's company's: a commit
	// without a stamp on a branch the template names is refused.
	BranchTemplate string `json:"branchTemplate"`
	IssuePrefix    string `json:"issuePrefix"`
}

// GateCheck asks, with a gate token, whether commits carrying stamps may
// be written (POST /api/gate/check; RULES.md, The git gate): one request
// for up to 1000 stamps (400 invalid_request beyond).
func (c *Client) GateCheck(ctx context.Context, stamps []clasp.GateStamp) (*GateCheckResult, error) {
	if stamps == nil {
		stamps = []clasp.GateStamp{}
	}
	var out GateCheckResult
	body := map[string]any{"stamps": stamps}
	if _, err := c.do(ctx, request{method: http.MethodPost, path: "/api/gate/check", body: body}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GateTokenCreate makes a gate token of company companyID (an admin of
// it); the answer carries the secret, shown this once.
func (c *Client) GateTokenCreate(ctx context.Context, companyID, name string) (*clasp.GateToken, error) {
	var out clasp.GateToken
	path := "/api/companies/" + url.PathEscape(companyID) + "/gate-tokens"
	if _, err := c.do(ctx, request{method: http.MethodPost, path: path, body: map[string]any{"name": name}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GateTokenList lists the gate tokens of a company, never the secrets.
func (c *Client) GateTokenList(ctx context.Context, companyID string) ([]*clasp.GateToken, error) {
	var out []*clasp.GateToken
	path := "/api/companies/" + url.PathEscape(companyID) + "/gate-tokens"
	if _, err := c.do(ctx, request{method: http.MethodGet, path: path}, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// GateTokenRevoke revokes a gate token of a company.
func (c *Client) GateTokenRevoke(ctx context.Context, companyID, id string) (*clasp.GateToken, error) {
	var out clasp.GateToken
	path := "/api/companies/" + url.PathEscape(companyID) + "/gate-tokens/" + url.PathEscape(id)
	if _, err := c.do(ctx, request{method: http.MethodDelete, path: path}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
