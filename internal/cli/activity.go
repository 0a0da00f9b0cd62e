package cli

import (
	"errors"
	"io"

	"github.com/spf13/cobra"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

func (a *app) newActivityCmd() *cobra.Command {
	var company, issue, action, entity string
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "activity [--company COMPANY_ID | --issue ISSUE]",
		Short: "Show the audit trail of a company or an issue, newest first",
		Long: `Show activity rows, newest first: who (agent, board or system) did what
(issue.checked_out, issue.released, issue.checkout_lock_adopted,
issue.stale_lock_cleared, run.lost, ...), in which run, with the details.
--issue shows one issue's trail; otherwise the company's, filtered by --action
and --entity.`,
		Example: `  clasp activity --issue ACME-12
  clasp activity --company <company-id> --action issue.stale_lock_cleared --all --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c := a.client()
			p := client.ActivityListParams{Action: action, EntityID: entity, Limit: lf.limit, Cursor: lf.cursor}
			var first *client.Page[*clasp.Activity]
			var err error
			if issue != "" {
				if company != "" || action != "" || entity != "" {
					return usageErr(errors.New("--issue cannot be combined with --company, --action or --entity"))
				}
				first, err = c.IssueActivity(ctx, issue, p)
			} else {
				var cid string
				if cid, err = a.companyID(ctx, c, company); err != nil {
					return err
				}
				first, err = c.CompanyActivity(ctx, cid, p)
			}
			if err != nil {
				return err
			}
			items, next, err := collect(ctx, first, lf.all)
			if err != nil {
				return err
			}
			var n *names
			if !a.jsonOut {
				n = a.names(0)
				n.learnActivity(ctx, items)
			}
			return emitList(a, items, next, func(w io.Writer, as []*clasp.Activity) { printActivity(w, as, n) })
		},
	}
	a.addClientFlags(cmd)
	f := cmd.Flags()
	f.StringVar(&company, "company", "", "company: its id, issue prefix or name (default $"+EnvCompanyID+", or the calling agent's)")
	f.StringVar(&issue, "issue", "", "one issue's trail (UUID or identifier)")
	f.StringVar(&action, "action", "", "only this action, e.g. issue.checked_out")
	f.StringVar(&entity, "entity", "", "only rows about this entity id")
	lf.add(cmd)
	return cmd
}
