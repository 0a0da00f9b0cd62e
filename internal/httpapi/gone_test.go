package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestClientGoneIsNotInternal: a request whose context has already ended
// (the client closed the connection, or its own deadline passed) before
// the server read its company or the stream's start is not a server fault:
// no route answers it with a 5xx. It answers 499 client_closed_request in
// the JSON error body.
func TestClientGoneIsNotInternal(t *testing.T) {
	b := setup(t)
	c := b.company("GONE")
	_, key := b.agent(c.ID, "a")
	h := b.srv.Handler()
	ended := map[string]func() (context.Context, context.CancelFunc){
		"cancelled": func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		},
		"deadline": func() (context.Context, context.CancelFunc) {
			return context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		},
	}
	paths := []string{
		"/api/companies/" + c.ID + "/events",
		"/api/companies/" + c.ID + "/events?after=0",
		"/api/companies/" + c.ID + "/issues",
		"/api/companies/" + c.ID,
	}
	for how, mk := range ended {
		for _, tok := range []string{b.board, key} {
			for _, p := range paths {
				ctx, cancel := mk()
				r := httptest.NewRequestWithContext(ctx, "GET", p, nil)
				r.Header.Set("Authorization", "Bearer "+tok)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, r)
				cancel()
				if rec.Code >= 500 {
					t.Errorf("%s GET %s: status %d: %s", how, p, rec.Code, rec.Body.Bytes())
					continue
				}
				if rec.Code == http.StatusOK {
					continue // answered before it looked at the context
				}
				var e errorBody
				if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Code == "" {
					t.Errorf("%s GET %s: status %d, body %q is not an error body", how, p, rec.Code, rec.Body.Bytes())
				}
			}
		}
	}
}
