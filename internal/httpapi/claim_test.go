package httpapi

import (
	"net/http"
	"testing"

	"github.com/clasp-dev/clasp"
)

// TestClaim: POST /api/agents/me/claim answers 204 with no body when
// nothing is eligible, 200 with the most urgent issue checked out for the
// calling run (one issue.checked_out), 400 naming the field for a bad
// scope or status, 401 run_id_required without a run, 403 for the board.
func TestClaim(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world("CL")

	r := b.do("POST", "/api/agents/me/claim", req{token: w.ka, run: w.ra1.ID})
	if r.status != http.StatusNoContent || len(r.body) != 0 {
		t.Fatalf("claim with no issues: got %d %q, want 204 and no body", r.status, r.body)
	}

	b.issue(w.c.ID, map[string]any{"title": "low", "status": "todo", "priority": "low"})
	urgent := b.issue(w.c.ID, map[string]any{"title": "urgent", "status": "todo", "priority": "critical"})
	b.issue(w.c.ID, map[string]any{"title": "theirs", "status": "todo", "priority": "critical", "assigneeAgentId": w.b.ID})

	var got clasp.Issue
	b.must(http.StatusOK, "POST", "/api/agents/me/claim", req{token: w.ka, run: w.ra1.ID, body: map[string]any{"scope": "any"}}, &got)
	if got.ID != urgent.ID || got.Status != clasp.IssueInProgress || deref(got.CheckoutRunID) != w.ra1.ID ||
		deref(got.AssigneeAgentID) != w.a.ID || got.CheckoutEpoch != 1 {
		t.Errorf("claim: got %s status %s holder %q assignee %q epoch %d; want %s in_progress held by %s, epoch 1",
			got.Identifier, got.Status, deref(got.CheckoutRunID), deref(got.AssigneeAgentID), got.CheckoutEpoch, urgent.Identifier, w.ra1.ID)
	}
	if n := countAction(b.activity(urgent.ID), clasp.ActionIssueCheckedOut); n != 1 {
		t.Errorf("issue.checked_out rows: got %d, want 1", n)
	}

	// scope mine: B's critical issue is not A's; A has none left of its own.
	r = b.do("POST", "/api/agents/me/claim", req{token: w.ka, run: w.ra2.ID, body: map[string]any{"scope": "mine"}})
	if r.status != http.StatusNoContent {
		t.Errorf("claim scope mine: got %d %q, want 204", r.status, r.body)
	}

	wantErr(t, b.do("POST", "/api/agents/me/claim", req{token: w.ka, run: w.ra1.ID, body: map[string]any{"scope": "everyone"}}),
		http.StatusBadRequest, clasp.CodeInvalidRequest, "scope")
	wantErr(t, b.do("POST", "/api/agents/me/claim", req{token: w.ka, run: w.ra1.ID, body: map[string]any{"expectedStatuses": []string{"soon"}}}),
		http.StatusBadRequest, clasp.CodeInvalidRequest, "expectedStatuses")
	wantErr(t, b.do("POST", "/api/agents/me/claim", req{token: w.ka, run: w.ra1.ID, body: map[string]any{"expectedStatuses": []string{"done"}}}),
		http.StatusUnprocessableEntity, clasp.CodePreconditionFailed, "expectedStatuses")
	wantErr(t, b.do("POST", "/api/agents/me/claim", req{token: w.ka, body: map[string]any{}}),
		http.StatusUnauthorized, clasp.CodeRunIDRequired, "")
	wantErr(t, b.do("POST", "/api/agents/me/claim", req{body: map[string]any{}}),
		http.StatusForbidden, clasp.CodeForbidden, "")
	// B's run cannot be named by A.
	wantErr(t, b.do("POST", "/api/agents/me/claim", req{token: w.ka, run: w.rb.ID}),
		http.StatusForbidden, clasp.CodeRunNotOwned, "")
}
