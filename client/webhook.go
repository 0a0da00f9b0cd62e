package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/clasp-dev/clasp"
)

// WebhookCreateRequest is the body of WebhookCreate. URL and Events are
// required; Secret empty lets the server generate one; Format empty is
// json; Enabled nil is true.
type WebhookCreateRequest struct {
	URL     string   `json:"url"`
	Events  []string `json:"events"`
	Secret  string   `json:"secret,omitempty"`
	Format  string   `json:"format,omitempty"`
	Enabled *bool    `json:"enabled,omitempty"`
}

// WebhookUpdateRequest is the body of WebhookUpdate; nil fields stay.
type WebhookUpdateRequest struct {
	URL     *string  `json:"url,omitempty"`
	Events  []string `json:"events,omitempty"`
	Secret  *string  `json:"secret,omitempty"`
	Format  *string  `json:"format,omitempty"`
	Enabled *bool    `json:"enabled,omitempty"`
}

// WebhookCreate subscribes URL to company companyID's activity actions
// matching Events (201); the answer carries the signing secret, shown this
// once. 400 invalid_request naming the field (a non-public literal
// address unless the server allows it); 403 for agents.
func (c *Client) WebhookCreate(ctx context.Context, companyID string, req WebhookCreateRequest) (*clasp.Webhook, error) {
	var out clasp.Webhook
	if _, err := c.do(ctx, request{method: http.MethodPost, path: pathf("/api/companies/%s/webhooks", companyID), body: req}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// WebhookList lists a company's subscriptions, oldest first, without
// their secrets.
func (c *Client) WebhookList(ctx context.Context, companyID string) ([]*clasp.Webhook, error) {
	var out []*clasp.Webhook
	if _, err := c.do(ctx, request{method: http.MethodGet, path: pathf("/api/companies/%s/webhooks", companyID)}, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// WebhookGet returns a subscription; 404 not_found.
func (c *Client) WebhookGet(ctx context.Context, id string) (*clasp.Webhook, error) {
	var out clasp.Webhook
	if _, err := c.do(ctx, request{method: http.MethodGet, path: pathf("/api/webhooks/%s", id)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// WebhookUpdate changes a subscription's fields that req sets.
func (c *Client) WebhookUpdate(ctx context.Context, id string, req WebhookUpdateRequest) (*clasp.Webhook, error) {
	var out clasp.Webhook
	if _, err := c.do(ctx, request{method: http.MethodPatch, path: pathf("/api/webhooks/%s", id), body: req}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// WebhookDelete deletes a subscription and its delivery log (204).
func (c *Client) WebhookDelete(ctx context.Context, id string) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: pathf("/api/webhooks/%s", id)}, nil)
	return err
}

// WebhookDeliveries returns the first page of a subscription's delivery
// log (limit 1..1000, 0 for the server's default), newest first; follow
// Page.Next for the rest.
func (c *Client) WebhookDeliveries(ctx context.Context, id string, limit int) (*Page[*clasp.WebhookDelivery], error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return getPage[*clasp.WebhookDelivery](ctx, c, request{method: http.MethodGet, path: pathf("/api/webhooks/%s/deliveries", id), query: q})
}

// WebhookRedeliver sends a delivery again at once with the same id (202).
func (c *Client) WebhookRedeliver(ctx context.Context, deliveryID string) (*clasp.WebhookDelivery, error) {
	var out clasp.WebhookDelivery
	if _, err := c.do(ctx, request{method: http.MethodPost, path: pathf("/api/webhook-deliveries/%s/redeliver", deliveryID), body: map[string]any{}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
