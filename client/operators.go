package client

import (
	"context"
	"net/http"
	"time"

	"github.com/clasp-dev/clasp"
)

// Operator is who a board credential acts as (GET /api/operators/me).
type Operator struct {
	ID        *string            `json:"id"` // nil for the tokenless board of --local-trusted
	Name      string             `json:"name"`
	Role      clasp.OperatorRole `json:"role"`
	CompanyID *string            `json:"companyId"` // nil: every company
	Session   bool               `json:"session"`   // the request came with a board session
}

// OperatorTokenCreateRequest is the body of an operator token's creation.
type OperatorTokenCreateRequest struct {
	Name      string             `json:"name"`
	Role      clasp.OperatorRole `json:"role"`
	CompanyID *string            `json:"companyId,omitempty"` // nil: every company
	ExpiresAt *time.Time         `json:"expiresAt,omitempty"` // nil: never
}

// OperatorMe returns the operator the board credential acts as (the
// board, any role). 401, 403 for an agent.
func (c *Client) OperatorMe(ctx context.Context) (*Operator, error) {
	var out Operator
	if _, err := c.do(ctx, request{method: http.MethodGet, path: "/api/operators/me"}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// OperatorTokenCreate creates an operator token (admin); the answer holds
// the secret, this once. 400, 403, 404 for a missing company.
func (c *Client) OperatorTokenCreate(ctx context.Context, in OperatorTokenCreateRequest) (*clasp.OperatorToken, error) {
	var out clasp.OperatorToken
	if _, err := c.do(ctx, request{method: http.MethodPost, path: "/api/operators/tokens", body: in}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// OperatorTokenList lists the operator tokens (admin), never the secrets.
func (c *Client) OperatorTokenList(ctx context.Context) ([]*clasp.OperatorToken, error) {
	var out []*clasp.OperatorToken
	if _, err := c.do(ctx, request{method: http.MethodGet, path: "/api/operators/tokens"}, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// OperatorTokenRevoke revokes an operator token (admin) and ends its
// board sessions; revoking twice answers it unchanged. 404.
func (c *Client) OperatorTokenRevoke(ctx context.Context, id string) (*clasp.OperatorToken, error) {
	var out clasp.OperatorToken
	if _, err := c.do(ctx, request{method: http.MethodDelete, path: pathf("/api/operators/tokens/%s", id)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// OperatorTokenRotate replaces an operator token (admin) with a new one of
// the same name, role, scope and expiry, and revokes it; the answer holds
// the new secret, this once. 404; 422 for a revoked or expired token.
func (c *Client) OperatorTokenRotate(ctx context.Context, id string) (*clasp.OperatorToken, error) {
	var out clasp.OperatorToken
	if _, err := c.do(ctx, request{method: http.MethodPost, path: pathf("/api/operators/tokens/%s/rotate", id), body: struct{}{}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
