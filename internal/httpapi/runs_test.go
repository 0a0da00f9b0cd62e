package httpapi

import (
	"net/http"
	"testing"

	"github.com/clasp-dev/clasp"
)

// Runs as resources by id.

// TestPathRunOfOtherCompanyIsNotFound: a run in the path (GET /runs/{id},
// its /heartbeat and /finish) is a resource by id: 404 not_found when it
// is missing or of another company (an agent sees only its company); a run
// named by the run header answers 422 run_not_found instead.
func TestPathRunOfOtherCompanyIsNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w1 := b.world("PA")
	w2 := b.world("PB")
	const missing = "0b0e2b53-6f42-4d6e-8f0c-2b7c1b9d1c3e"
	for _, id := range []string{w2.ra1.ID, missing} {
		wantErr(t, b.do("GET", "/api/runs/"+id, req{token: w1.ka}), 404, clasp.CodeNotFound, "")
		wantErr(t, b.do("POST", "/api/runs/"+id+"/heartbeat", req{token: w1.ka}), 404, clasp.CodeNotFound, "")
		wantErr(t, b.do("POST", "/api/runs/"+id+"/finish", req{token: w1.ka, body: map[string]any{"status": "cancelled"}}), 404, clasp.CodeNotFound, "")
		wantErr(t, b.do("GET", "/api/agents/me", req{token: w1.ka, run: id}), 422, clasp.CodeRunNotFound, "")
	}
	wantErr(t, b.do("POST", "/api/runs/"+missing+"/finish", req{body: map[string]any{"status": "cancelled"}}), 404, clasp.CodeNotFound, "")
	var r clasp.Run
	b.must(http.StatusOK, "GET", "/api/runs/"+w2.ra1.ID, req{}, &r)
	if r.Status != clasp.RunRunning {
		t.Errorf("the other company's run: got %s, want running (untouched)", r.Status)
	}
}
