package httpapi

import (
	"net/http"
	"testing"

	"github.com/clasp-dev/clasp"
)

// TestCompanyBranchTemplate: a company's branch template (RULES.md G5) is
// clasp/{identifier} by default, settable at create and by PATCH (admin),
// shown in company answers, named by the workspace of every checkout and
// claim granted after it is set, and answered by the gate's check (G3);
// a bad template is 400 invalid_request naming branchTemplate, on both
// stores.
func TestCompanyBranchTemplate(t *testing.T) {
	eachStore(t, func(t *testing.T, pg bool) {
		b := setup(t, onPG(pg))
		w := b.world("BT")
		if w.c.BranchTemplate != clasp.DefaultBranchTemplate {
			t.Errorf("default template %q, want %q", w.c.BranchTemplate, clasp.DefaultBranchTemplate)
		}
		var co clasp.Company
		b.must(http.StatusCreated, "POST", "/api/companies", req{body: map[string]any{"name": "Templated", "issuePrefix": "TPL", "branchTemplate": "work/{identifier}"}}, &co)
		if co.BranchTemplate != "work/{identifier}" {
			t.Errorf("created with template: got %q", co.BranchTemplate)
		}
		wantErr(t, b.do("POST", "/api/companies", req{body: map[string]any{"name": "Bad", "issuePrefix": "BAD", "branchTemplate": "work/{id}"}}), http.StatusBadRequest, clasp.CodeInvalidRequest, "branchTemplate")
		for _, bad := range []string{"", "work", "a..b/{identifier}", "{identifier}.lock", "w/{identifier}/", "w {identifier}", "x/{foo}/{identifier}"} {
			wantErr(t, b.do("PATCH", "/api/companies/"+w.c.ID, req{body: map[string]any{"branchTemplate": bad}}), http.StatusBadRequest, clasp.CodeInvalidRequest, "branchTemplate")
		}
		wantErr(t, b.do("PATCH", "/api/companies/"+w.c.ID, req{body: map[string]any{}}), http.StatusBadRequest, clasp.CodeInvalidRequest, "name")

		// The default template names the branch until the PATCH.
		first := b.issue(w.c.ID, map[string]any{"status": "todo"})
		got := decode[clasp.Issue](t, b.checkout(first.Identifier, w.ka, w.ra1.ID, w.a.ID))
		if got.Workspace == nil || got.Workspace.Branch != "clasp/"+first.Identifier {
			t.Fatalf("checkout under the default template: workspace %+v", got.Workspace)
		}
		b.must(http.StatusOK, "PATCH", "/api/companies/"+w.c.ID, req{body: map[string]any{"branchTemplate": "agents/{prefix}/{identifier}"}}, &co)
		if co.BranchTemplate != "agents/{prefix}/{identifier}" || co.IssuePrefix != "BT" {
			t.Fatalf("patched company: %+v", co)
		}
		b.must(http.StatusOK, "GET", "/api/companies/"+w.c.ID, req{}, &co)
		if co.BranchTemplate != "agents/{prefix}/{identifier}" {
			t.Errorf("company after PATCH: template %q", co.BranchTemplate)
		}
		second := b.issue(w.c.ID, map[string]any{"status": "todo"})
		got = decode[clasp.Issue](t, b.checkout(second.Identifier, w.ka, w.ra2.ID, w.a.ID))
		if want := "agents/BT/" + second.Identifier; got.Workspace == nil || got.Workspace.Branch != want || got.Workspace.Stamp != clasp.Stamp(second.Identifier, 1) {
			t.Errorf("checkout after the PATCH: workspace %+v, want branch %s", got.Workspace, want)
		}
		third := b.issue(w.c.ID, map[string]any{"status": "todo"})
		var claimed clasp.Issue
		b.must(http.StatusOK, "POST", "/api/agents/me/claim", req{token: w.rb.RunToken, body: map[string]any{"scope": "any"}}, &claimed)
		if want := "agents/BT/" + claimed.Identifier; claimed.Identifier != third.Identifier || claimed.Workspace == nil || claimed.Workspace.Branch != want {
			t.Errorf("claim: %s with workspace %+v, want %s on %s", claimed.Identifier, claimed.Workspace, third.Identifier, want)
		}
		acts := b.activityOf(w.c.ID)
		updated := 0
		for _, a := range acts {
			if a.Action == clasp.ActionCompanyUpdated {
				updated++
			}
		}
		if updated != 1 {
			t.Errorf("%d company.updated rows, want 1", updated)
		}

		var g clasp.GateToken
		b.must(http.StatusCreated, "POST", "/api/companies/"+w.c.ID+"/gate-tokens", req{body: map[string]any{"name": "ci"}}, &g)
		var out struct {
			BranchTemplate string `json:"branchTemplate"`
			IssuePrefix    string `json:"issuePrefix"`
		}
		b.must(http.StatusOK, "POST", "/api/gate/check", req{token: g.Token, body: map[string]any{"stamps": []map[string]any{}}}, &out)
		if out.BranchTemplate != "agents/{prefix}/{identifier}" || out.IssuePrefix != "BT" {
			t.Errorf("gate check answer: %+v, want the company's template and prefix", out)
		}
	})
}
