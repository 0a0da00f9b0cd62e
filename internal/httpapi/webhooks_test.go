package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/clasp-dev/clasp"
)

// TestWebhooksAPI: subscriptions over HTTP on both stores (RULES.md W5,
// W6): bad input is 400 naming the field and creates nothing; a literal
// non-public target is refused unless the server allows it; the secret is
// generated and shown once; the log lists deliveries and a redelivery
// makes one pending.
func TestWebhooksAPI(t *testing.T) {
	bothStores(t, func(t *testing.T, b *bundle) {
		co := b.company("WH")
		path := "/api/companies/" + co.ID + "/webhooks"
		bad := []struct {
			body  map[string]any
			field string
			says  string
		}{
			{map[string]any{"events": []string{"*"}}, "url", "required"},
			{map[string]any{"url": "https://example.com"}, "events", "required"},
			{map[string]any{"url": "https://example.com", "events": []string{}}, "events", "at least one"},
			{map[string]any{"url": "https://example.com", "events": []string{"Issue.Created"}}, "events", "not an event pattern"},
			{map[string]any{"url": "gopher://example.com", "events": []string{"*"}}, "url", "http"},
			{map[string]any{"url": "https://example.com", "events": []string{"*"}, "secret": "short"}, "secret", "16 to 256"},
			{map[string]any{"url": "https://example.com", "events": []string{"*"}, "format": "xml"}, "format", "slack"},
			{map[string]any{"url": "http://127.0.0.1:9/x", "events": []string{"*"}}, "url", "--webhook-allow-private"},
			{map[string]any{"url": "http://localhost/x", "events": []string{"*"}}, "url", "--webhook-allow-private"},
			{map[string]any{"url": "http://10.1.2.3/x", "events": []string{"*"}}, "url", "--webhook-allow-private"},
			{map[string]any{"url": "http://[::1]/x", "events": []string{"*"}}, "url", "--webhook-allow-private"},
			{map[string]any{"url": "http://169.254.169.254/latest", "events": []string{"*"}}, "url", "--webhook-allow-private"},
			{map[string]any{"url": "https://example.com", "events": []string{"*"}, "colour": "red"}, "colour", ""},
		}
		for _, c := range bad {
			e := wantErr(t, b.do("POST", path, req{body: c.body}), http.StatusBadRequest, clasp.CodeInvalidRequest, c.field)
			if !strings.Contains(e.Error, c.says) {
				t.Errorf("create %v: message %q does not say %q", c.body, e.Error, c.says)
			}
		}
		var list []clasp.Webhook
		b.must(http.StatusOK, "GET", path, req{}, &list)
		if len(list) != 0 {
			t.Fatalf("%d subscriptions after refused creates", len(list))
		}
		var w clasp.Webhook
		b.must(http.StatusCreated, "POST", path, req{body: map[string]any{"url": "https://example.com/hook", "events": []string{"issue.*"}}}, &w)
		if !strings.HasPrefix(w.Secret, WebhookSecretPrefix) || len(w.Secret) < 40 || w.Format != "json" || !w.Enabled || w.Failing {
			t.Errorf("created: %+v", w)
		}
		var got clasp.Webhook
		b.must(http.StatusOK, "GET", "/api/webhooks/"+w.ID, req{}, &got)
		if got.Secret != "" {
			t.Errorf("GET shows the secret")
		}
		wantErr(t, b.do("PATCH", "/api/webhooks/"+w.ID, req{body: map[string]any{"url": "http://192.168.1.1/"}}), http.StatusBadRequest, clasp.CodeInvalidRequest, "url")
		wantErr(t, b.do("PATCH", "/api/webhooks/"+w.ID, req{body: map[string]any{"events": []string{}}}), http.StatusBadRequest, clasp.CodeInvalidRequest, "events")
		b.must(http.StatusOK, "PATCH", "/api/webhooks/"+w.ID, req{body: map[string]any{"format": "slack", "secret": "a secret of mine, long enough"}}, &got)
		if got.Format != "slack" || got.Secret != "a secret of mine, long enough" {
			t.Errorf("patched: %+v", got)
		}
		iss := b.issue(co.ID, nil)
		var ds []clasp.WebhookDelivery
		b.must(http.StatusOK, "GET", "/api/webhooks/"+w.ID+"/deliveries", req{}, &ds)
		if len(ds) != 1 || ds[0].Event != clasp.ActionIssueCreated || ds[0].EntityID != iss.ID || ds[0].Status != clasp.DeliveryPending {
			t.Fatalf("deliveries: %+v", ds)
		}
		var d clasp.WebhookDelivery
		b.must(http.StatusAccepted, "POST", "/api/webhook-deliveries/"+ds[0].ID+"/redeliver", req{}, &d)
		if d.ID != ds[0].ID || d.Status != clasp.DeliveryPending {
			t.Errorf("redelivered: %+v", d)
		}
		wantErr(t, b.do("GET", "/api/webhooks/"+w.ID+"/deliveries?limit=0", req{}), http.StatusBadRequest, clasp.CodeInvalidRequest, "limit")
		wantErr(t, b.do("GET", "/api/webhooks/"+w.ID+"/deliveries?cursor=zz", req{}), http.StatusBadRequest, clasp.CodeInvalidRequest, "cursor")
		b.must(http.StatusNoContent, "DELETE", "/api/webhooks/"+w.ID, req{}, nil)
		wantErr(t, b.do("GET", "/api/webhooks/"+w.ID, req{}), http.StatusNotFound, clasp.CodeNotFound, "")
		wantErr(t, b.do("POST", "/api/webhook-deliveries/"+ds[0].ID+"/redeliver", req{}), http.StatusNotFound, clasp.CodeNotFound, "")
	})
}

// TestWebhooksAllowPrivate: with the server's permission a loopback
// target may be subscribed.
func TestWebhooksAllowPrivate(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOpts) { o.webhookAllowPrivate = true })
	co := b.company("WP")
	b.must(http.StatusCreated, "POST", "/api/companies/"+co.ID+"/webhooks", req{body: map[string]any{"url": "http://127.0.0.1:9/x", "events": []string{"*"}}}, nil)
}
