package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/clasp-dev/clasp/client"
)

// newIssueClaimCmd is `clasp issue claim`: claim-next (POST
// /api/agents/me/claim).
func (a *app) newIssueClaimCmd() *cobra.Command {
	var expect, scope string
	cmd := &cobra.Command{
		Use:   "claim",
		Short: "Check out the most urgent issue you may take (claim-next)",
		Long: `Check out, for the run you act in (a run token CLASP_TOKEN=clasp_rt_..., or an
agent key plus --run / CLASP_RUN_ID), the most urgent issue you could check out:
highest priority first, then the oldest. Eligible are issues of your company
within --scope (mine: assigned to you; unassigned; any: either) whose status is
one of --expect, or which are in_progress and yours with no live lock; never an
issue another live run holds. The pick and the checkout are one write, so
concurrent claimers never conflict: each gets a different issue.

It prints the issue (as checkout does), or "Nothing to claim." (JSON: null)
when no issue is eligible; both exit 0.`,
		Example: `  CLASP_TOKEN=clasp_rt_... clasp issue claim
  clasp issue claim --run <run-id> --scope unassigned --expect todo,blocked --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			sts, err := parseIssueStatuses(expect)
			if err != nil {
				return err
			}
			iss, err := a.client().Claim(cmd.Context(), client.ClaimRequest{ExpectedStatuses: sts, Scope: scope})
			if err != nil {
				return err
			}
			if iss == nil {
				return a.emit(nil, func(w io.Writer) { fmt.Fprintln(w, "Nothing to claim.") })
			}
			return a.emit(iss, func(w io.Writer) {
				fmt.Fprintf(w, "Claimed %s (checkout epoch %d, run %s).\n", iss.Identifier, iss.CheckoutEpoch, optStr(iss.CheckoutRunID))
				printIssue(w, iss, a.issueDetailNames(cmd.Context(), iss))
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&expect, "expect", "todo", "comma-separated statuses an issue may have")
	f.StringVar(&scope, "scope", "any", "whose issues: mine, unassigned or any")
	return cmd
}
