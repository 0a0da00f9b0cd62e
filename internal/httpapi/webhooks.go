package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
	"github.com/clasp-dev/clasp/internal/webhook"
)

// Webhook subscriptions and their delivery log (RULES.md, Webhooks,
// W4-W6): the board's and operators' (agents 403); a subscription or
// delivery of a company the operator does not see is 404.

type webhookCreateIn struct {
	URL     *string  `json:"url"`
	Events  []string `json:"events"`
	Secret  *string  `json:"secret"`
	Format  *string  `json:"format"`
	Enabled *bool    `json:"enabled"`
}

func (in *webhookCreateIn) validate() error {
	if in.URL == nil {
		return clasp.InvalidField("url", "Field \"url\" is required: the http(s) URL deliveries are POSTed to.")
	}
	if in.Events == nil {
		return clasp.InvalidField("events", "Field \"events\" is required: the actions to deliver, such as [\"issue.*\", \"run.finished\"].")
	}
	return nil
}

type webhookUpdateIn struct {
	URL     *string  `json:"url"`
	Events  []string `json:"events"`
	Secret  *string  `json:"secret"`
	Format  *string  `json:"format"`
	Enabled *bool    `json:"enabled"`
}

func (in *webhookUpdateIn) validate() error { return nil }

// checkTarget answers 400 invalid_request (field url) for a URL whose
// host is a literal address that is not public, or localhost, unless the
// server allows private targets (RULES.md W5). Host names are checked on
// the address they resolve to at each delivery.
func (s *Server) checkTarget(raw string) error {
	if err := store.CheckWebhookURL(raw); err != nil || s.cfg.WebhookAllowPrivate {
		return err
	}
	u, _ := url.Parse(raw)
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return clasp.InvalidField("url", "url names localhost, a loopback target: refused unless the server runs with --webhook-allow-private.")
	}
	if ip := net.ParseIP(host); ip != nil {
		if err := webhook.CheckAddr(ip); err != nil {
			return clasp.InvalidField("url", "url names %s, which is not a public address: refused unless the server runs with --webhook-allow-private.", ip)
		}
	}
	return nil
}

// webhookCreate: POST /api/companies/{companyId}/webhooks {url, events,
// secret?, format?, enabled?}: 201 the subscription with its secret,
// generated when not given and shown this once (RULES.md W6).
func (s *Server) webhookCreate(ctx context.Context, c *call, in *webhookCreateIn) (int, any, error) {
	if err := s.checkTarget(*in.URL); err != nil {
		return 0, nil, err
	}
	p := &store.WebhookCreateParams{CompanyID: pathUUID(c, "companyId"), URL: *in.URL, Events: in.Events, Enabled: in.Enabled}
	if in.Format != nil {
		p.Format = *in.Format
	}
	if in.Secret != nil {
		p.Secret = *in.Secret
	} else {
		p.Secret = newWebhookSecret()
	}
	w, err := s.st.WebhookCreate(ctx, p)
	if err != nil {
		return 0, nil, err
	}
	s.nudgeWebhooks()
	return http.StatusCreated, w, nil
}

// webhookList: GET /api/companies/{companyId}/webhooks: the company's
// subscriptions, oldest first, without their secrets.
func (s *Server) webhookList(ctx context.Context, c *call) (int, any, error) {
	cid := pathUUID(c, "companyId")
	if _, err := s.st.CompanyGet(ctx, cid); err != nil {
		return 0, nil, err
	}
	ws, err := s.st.WebhookList(ctx, cid)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, list(ws), nil
}

// visibleWebhook returns the subscription of the path's {id}; 404 when
// there is none or the caller does not see its company.
func (s *Server) visibleWebhook(ctx context.Context, c *call) (*clasp.Webhook, error) {
	id := pathUUID(c, "id")
	w, err := s.st.WebhookGet(ctx, id)
	if err != nil {
		return nil, err
	}
	if !c.sees(w.CompanyID) {
		return nil, notVisible("webhook", id)
	}
	return w, nil
}

// webhookGet: GET /api/webhooks/{id}: the subscription, without its secret.
func (s *Server) webhookGet(ctx context.Context, c *call) (int, any, error) {
	w, err := s.visibleWebhook(ctx, c)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, w, nil
}

// webhookUpdate: PATCH /api/webhooks/{id} {url?, events?, secret?,
// format?, enabled?}: 200 the subscription (with the secret when the
// request set one).
func (s *Server) webhookUpdate(ctx context.Context, c *call, in *webhookUpdateIn) (int, any, error) {
	w, err := s.visibleWebhook(ctx, c)
	if err != nil {
		return 0, nil, err
	}
	if in.URL != nil {
		if err := s.checkTarget(*in.URL); err != nil {
			return 0, nil, err
		}
	}
	if in.Events != nil && len(in.Events) == 0 {
		return 0, nil, clasp.InvalidField("events", "events must list at least one action or pattern; disable the subscription with {\"enabled\": false} instead.")
	}
	out, err := s.st.WebhookUpdate(ctx, &store.WebhookUpdateParams{ID: w.ID, URL: in.URL, Events: in.Events, Secret: in.Secret,
		Format: in.Format, Enabled: in.Enabled})
	if err != nil {
		return 0, nil, err
	}
	s.nudgeWebhooks()
	return http.StatusOK, out, nil
}

// webhookDelete: DELETE /api/webhooks/{id}: 204; the subscription and its
// delivery log are gone, and what was not sent is never sent.
func (s *Server) webhookDelete(ctx context.Context, c *call) (int, any, error) {
	w, err := s.visibleWebhook(ctx, c)
	if err != nil {
		return 0, nil, err
	}
	if err := s.st.WebhookDelete(ctx, w.ID); err != nil {
		return 0, nil, err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return 0, streamed, nil
}

// webhookDeliveries: GET /api/webhooks/{id}/deliveries?limit&cursor: the
// delivery log, newest first (RULES.md W4), with a Link to the next page.
func (s *Server) webhookDeliveries(ctx context.Context, c *call) (int, any, error) {
	page, err := pageParams(c.r.URL.Query())
	if err != nil {
		return 0, nil, err
	}
	w, err := s.visibleWebhook(ctx, c)
	if err != nil {
		return 0, nil, err
	}
	ds, next, err := s.st.WebhookDeliveryList(ctx, w.ID, page)
	if err != nil {
		return 0, nil, err
	}
	setNextLink(c, "cursor", next)
	return http.StatusOK, list(ds), nil
}

// webhookRedeliver: POST /api/webhook-deliveries/{id}/redeliver: the
// delivery is sent again at once with the same Clasp-Delivery id (RULES.md
// W4); 202 and the delivery, pending.
func (s *Server) webhookRedeliver(ctx context.Context, c *call, _ *struct{}) (int, any, error) {
	id := pathUUID(c, "id")
	d, err := s.st.WebhookDeliveryGet(ctx, id)
	if err != nil {
		return 0, nil, err
	}
	if !c.sees(d.CompanyID) {
		return 0, nil, notVisible("webhook delivery", id)
	}
	out, err := s.st.WebhookRedeliver(ctx, id)
	if err != nil {
		return 0, nil, err
	}
	s.nudgeWebhooks()
	return http.StatusAccepted, out, nil
}

// WebhookSecretPrefix starts every signing secret the server generates.
const WebhookSecretPrefix = "whsec_"

// newWebhookSecret returns a fresh signing secret: WebhookSecretPrefix
// and 256 random bits in unpadded base64url.
func newWebhookSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it crashes the program instead)
	return WebhookSecretPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// attentionList: GET /api/companies/{companyId}/attention: the issues
// that need a person, escalated ones first, then abandoned ones (RULES.md
// E5); at most 200.
func (s *Server) attentionList(ctx context.Context, c *call) (int, any, error) {
	cid := pathUUID(c, "companyId")
	if _, err := s.st.CompanyGet(ctx, cid); err != nil {
		return 0, nil, err
	}
	items, err := s.st.AttentionList(ctx, cid)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, list(items), nil
}
