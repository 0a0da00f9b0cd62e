package httpapi

import (
	"net/http"
	"testing"

	"github.com/clasp-dev/clasp"
)

// Credentials: what each token may do.

// TestRunTokenCannotOpenRunsAfterKeyRevoked: a run token acts for its own
// run only, so it cannot open runs (403 forbidden); once the key that
// opened its run is revoked, the run has ended with the key and the token
// is 401 like the key itself (revoking a key ends every token it led to).
func TestRunTokenCannotOpenRunsAfterKeyRevoked(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, b *bundle) {
		co := b.company("RV")
		ag, key := b.agent(co.ID, "alpha")
		run := b.run(key)
		wantErr(t, b.do("POST", "/api/agents/me/runs", req{token: run.RunToken, body: map[string]any{}}), http.StatusForbidden, clasp.CodeForbidden, "")
		var keys []clasp.APIKey
		b.must(http.StatusOK, "GET", "/api/agents/"+ag.ID+"/keys", req{}, &keys)
		if len(keys) != 1 {
			t.Fatalf("agent has %d keys, want 1", len(keys))
		}
		b.must(http.StatusOK, "DELETE", "/api/agents/"+ag.ID+"/keys/"+keys[0].ID, req{}, nil)
		wantErr(t, b.do("POST", "/api/agents/me/runs", req{token: run.RunToken, body: map[string]any{}}), http.StatusUnauthorized, clasp.CodeUnauthenticated, "")
		wantErr(t, b.do("POST", "/api/agents/me/runs", req{token: key, body: map[string]any{}}), http.StatusUnauthorized, clasp.CodeUnauthenticated, "")
	})
}

// TestRequireRunTokenHeartbeatAndFinish: with --require-run-token, a run's
// heartbeat and finish by an agent take only the run's token (its API
// key, with or without the run header, is 401); the board still finishes
// any run.
func TestRequireRunTokenHeartbeatAndFinish(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOpts) { o.requireRunToken = true })
	w := b.world("RF")
	hb := "/api/runs/" + w.ra1.ID + "/heartbeat"
	fin := "/api/runs/" + w.ra1.ID + "/finish"
	done := map[string]any{"status": "succeeded"}
	wantErr(t, b.do("POST", hb, req{token: w.ka}), 401, clasp.CodeUnauthenticated, "")
	wantErr(t, b.do("POST", hb, req{token: w.ka, run: w.ra1.ID}), 401, clasp.CodeUnauthenticated, "")
	wantErr(t, b.do("POST", fin, req{token: w.ka, body: done}), 401, clasp.CodeUnauthenticated, "")
	wantErr(t, b.do("POST", fin, req{token: w.ka, run: w.ra1.ID, body: done}), 401, clasp.CodeUnauthenticated, "")
	b.must(http.StatusOK, "POST", hb, req{token: w.ra1.RunToken}, nil)
	b.must(http.StatusOK, "POST", fin, req{token: w.ra1.RunToken, body: done}, nil)
	b.must(http.StatusOK, "POST", "/api/runs/"+w.ra2.ID+"/finish", req{body: map[string]any{"status": "cancelled"}}, nil)
}

func TestParseUUIDCanonical(t *testing.T) {
	for in, want := range map[string]string{
		"0b5d1c3e-8f7a-4c2b-9e6d-1a2b3c4d5e6f": "0b5d1c3e-8f7a-4c2b-9e6d-1a2b3c4d5e6f",
		"0B5D1C3E-8F7A-4C2B-9E6D-1A2B3C4D5E6F": "0b5d1c3e-8f7a-4c2b-9e6d-1a2b3c4d5e6f",
		"0b5d1c3e-8f7a-4C2b-9e6d-1a2b3c4d5e6f": "0b5d1c3e-8f7a-4c2b-9e6d-1a2b3c4d5e6f",
	} {
		if got, ok := parseUUID(in); !ok || got != want {
			t.Errorf("parseUUID(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "0b5d1c3e-8f7a-4c2b-9e6d-1a2b3c4d5e6", "0b5d1c3e-8f7a-4c2b-9e6d-1a2b3c4d5e6g", "0b5d1c3e08f7a-4c2b-9e6d-1a2b3c4d5e6f"} {
		if got, ok := parseUUID(in); ok {
			t.Errorf("parseUUID(%q) = %q, true; want false", in, got)
		}
	}
}
