package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/clasp-dev/clasp"
)

// TestConflictMessagesNameTheCallersReference: a 409 for a checkout or an
// owner-only write of an issue addressed by its identifier names the issue
// by that identifier (what the caller typed), not by its UUID; the UUID
// stays in details.issueId. Addressed by UUID, the message names the UUID.
// Both stores.
func TestConflictMessagesNameTheCallersReference(t *testing.T) {
	t.Parallel()
	for _, pg := range []bool{false, true} {
		name := "sqlite"
		if pg {
			name = "postgres"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(o *setupOpts) { o.postgres = pg })
			w := b.world("REF")
			iss := b.issue(w.c.ID, map[string]any{"status": "todo"})
			b.must(http.StatusOK, "POST", "/api/issues/"+iss.Identifier+"/checkout",
				req{token: w.ka, run: w.ra1.ID, body: map[string]any{"agentId": w.a.ID, "expectedStatuses": []string{"todo"}}}, nil)

			for _, tc := range []struct {
				what, ref, code string
				r               *resp
			}{
				{"checkout by identifier", "ref-1", clasp.CodeCheckoutConflict, b.do("POST", "/api/issues/ref-1/checkout",
					req{token: w.ka, run: w.ra2.ID, body: map[string]any{"agentId": w.a.ID, "expectedStatuses": []string{"todo"}}})},
				{"patch by identifier", "REF-1", clasp.CodeOwnershipConflict, b.do("PATCH", "/api/issues/REF-1",
					req{token: w.ka, run: w.ra2.ID, body: map[string]any{"title": "x"}})},
				{"checkout by UUID", iss.ID, clasp.CodeCheckoutConflict, b.do("POST", "/api/issues/"+iss.ID+"/checkout",
					req{token: w.ka, run: w.ra2.ID, body: map[string]any{"agentId": w.a.ID, "expectedStatuses": []string{"todo"}}})},
			} {
				e := wantErr(t, tc.r, http.StatusConflict, tc.code, "")
				if !strings.HasPrefix(e.Error, "Issue "+tc.ref+" ") {
					t.Errorf("%s: message %q, want it to start with %q", tc.what, e.Error, "Issue "+tc.ref+" ")
				}
				if tc.ref != iss.ID && strings.Contains(e.Error, iss.ID) {
					t.Errorf("%s: message %q names the UUID the caller did not use", tc.what, e.Error)
				}
				if e.Details["issueId"] != iss.ID {
					t.Errorf("%s: details.issueId = %v, want %s", tc.what, e.Details["issueId"], iss.ID)
				}
			}
		})
	}
}

// TestHealthzCarriesTheVersion: GET /healthz answers the build's version
// and commit beside status ok.
func TestHealthzCarriesTheVersion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var got map[string]string
	b.must(http.StatusOK, "GET", "/healthz", req{noAuth: true}, &got)
	want := clasp.Build()
	if got["status"] != "ok" || got["version"] != want.Version || got["version"] == "" || got["commit"] != want.Commit {
		t.Errorf("/healthz = %v, want status ok, version %q, commit %q", got, want.Version, want.Commit)
	}
}
