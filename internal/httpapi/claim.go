package httpapi

import (
	"context"
	"net/http"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// claimIn is the body of POST /api/agents/me/claim (claim-next).
// Both fields are optional: expectedStatuses defaults to [todo], scope to
// "any" (the agent's issues or unassigned ones).
type claimIn struct {
	ExpectedStatuses []clasp.IssueStatus `json:"expectedStatuses"`
	Scope            *string             `json:"scope"`
}

func (in *claimIn) validate() error {
	if in.Scope != nil && !store.ClaimScope(*in.Scope).Valid() {
		return clasp.InvalidField("scope", "Field \"scope\" must be one of mine, unassigned, any; not %q.", truncate(*in.Scope, 64))
	}
	if in.ExpectedStatuses != nil {
		if _, err := store.ValidateExpected(in.ExpectedStatuses, "claim"); err != nil {
			return err
		}
	}
	return nil
}

// issueClaim: POST /api/agents/me/claim (claim-next). The calling
// agent's live run checks out the most urgent issue it may take under rule
// L1 (priority, then age), in one statement with the activity rows of a
// checkout (L1, L3). 200 with the issue; 204 with no body when no issue is
// eligible. Errors: 400 invalid_request (scope, expectedStatuses; details.field),
// 422 precondition_failed (a closed status expected), 401 run_id_required,
// and the run problems of every run-bearing call (422 run_not_found, 403
// run_not_owned, 409 run_not_live). Never 409 checkout_conflict.
func (s *Server) issueClaim(ctx context.Context, c *call, in *claimIn) (status int, v any, err error) {
	if err := refusePaused(c, "claim issues"); err != nil {
		return 0, nil, err
	}
	var scope store.ClaimScope
	if in.Scope != nil {
		scope = store.ClaimScope(*in.Scope)
	}
	tmpl, prefix, err := s.grantTemplate(ctx, c)
	if err != nil {
		return 0, nil, err
	}
	var res store.CheckoutResult
	iss, err := s.st.IssueClaim(ctx, &store.IssueClaimParams{
		ExpectedStatuses: in.ExpectedStatuses, Scope: scope, Actor: c.actor(), Result: &res,
	})
	if err != nil {
		s.countCheckout(&res, err)
		return 0, nil, err
	}
	if iss == nil {
		h := c.w.Header()
		h.Set("Cache-Control", "no-store")
		c.w.WriteHeader(http.StatusNoContent)
		return 0, streamed, nil
	}
	s.countCheckout(&res, nil)
	return http.StatusOK, withWorkspace(c, iss, tmpl, prefix), nil
}
