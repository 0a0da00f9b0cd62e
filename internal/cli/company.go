package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

func (a *app) newCompanyCmd() *cobra.Command {
	g := a.newGroup("company", "Create and read companies (tenants; board token)",
		`A company is a tenant: every agent, issue, run and activity row belongs to
exactly one. These commands need the board token (or a server started with
--local-trusted). A company is named by its id, its issue prefix or its name.
An archived company is left out of the list and the board's picker until it
is restored; its agents, issues and runs stay as they are.`,
		`  clasp company create "Acme Robotics" --prefix ACME
  clasp company list
  clasp company show ACME --json
  clasp company update ACME --branch-template 'agents/{prefix}/{identifier}'
  clasp company archive ACME
  clasp company list --archived
  clasp company unarchive ACME`)
	g.AddCommand(a.newCompanyCreateCmd(), a.newCompanyUpdateCmd(), a.newCompanyListCmd(), a.newCompanyShowCmd(),
		a.newCompanyArchiveCmd(true), a.newCompanyArchiveCmd(false))
	return g
}

func (a *app) newCompanyCreateCmd() *cobra.Command {
	var prefix, branchTemplate string
	var escalate int
	cmd := &cobra.Command{
		Use:   "create NAME [--prefix PREFIX] [--branch-template TEMPLATE] [--escalate-after-failures N]",
		Short: "Create a company",
		Long: `Create a company. Its issues are identified PREFIX-1, PREFIX-2, ...; the
prefix is 2-10 upper-case letters and unique across companies (a taken prefix
answers 409 already_exists, exit code 3). Without --prefix the server derives
one from the name: its first three letters upper-cased ("Acme Robotics": ACM),
else longer ones (ACME, ...) when that is taken; the company printed shows it.

--branch-template names the git branch of each issue's work, given in the
workspace of every checkout and claim and checked by 'clasp gate check'
(unstamped commits on such branches are refused): {identifier} (required) is
the issue's identifier, {prefix} the company's issue prefix. The default is
clasp/{identifier}; the result must be a valid git branch name.`,
		Example: `  clasp company create "Acme Robotics" --prefix ACME
  clasp company create "Beta Labs"
  clasp company create "Gamma" --prefix GAM --branch-template 'work/{identifier}'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("prefix") && prefix == "" {
				return usageErr(errors.New("--prefix is empty: give 2-10 upper-case letters, or leave --prefix out to have one derived from the name"))
			}
			req := client.CompanyCreateRequest{Name: args[0], IssuePrefix: prefix, BranchTemplate: branchTemplate}
			if cmd.Flags().Changed("escalate-after-failures") {
				if escalate < 0 || escalate > clasp.MaxEscalateAfterFailures {
					return usageErr(fmt.Errorf("--escalate-after-failures must be from 0 (never) to %d, not %d", clasp.MaxEscalateAfterFailures, escalate))
				}
				req.EscalateAfterFailures = &escalate
			}
			co, err := a.client().CompanyCreate(cmd.Context(), req)
			if err != nil {
				return err
			}
			return a.emit(co, func(w io.Writer) { printCompany(w, co) })
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "issue identifier prefix, 2-10 upper-case letters (default: derived from the name by the server)")
	cmd.Flags().StringVar(&branchTemplate, "branch-template", "", "the git branch of each issue's work: {identifier} (required) and {prefix} are replaced (default "+clasp.DefaultBranchTemplate+")")
	cmd.Flags().IntVar(&escalate, "escalate-after-failures", clasp.DefaultEscalateAfterFailures, "escalate an issue to a person (block it, comment, issue.escalated) after this many runs of it in a row fail; 0 never")
	return cmd
}

func (a *app) newCompanyUpdateCmd() *cobra.Command {
	var name, branchTemplate string
	var escalate int
	cmd := &cobra.Command{
		Use:   "update COMPANY [--name NAME] [--branch-template TEMPLATE] [--escalate-after-failures N]",
		Short: "Rename a company, change its branch template or its escalation setting",
		Long: `Change a company (its id, issue prefix or name): its name; its branch
template, which names the git branch of each issue's work from the next
checkout or claim on ({identifier} required, {prefix} optional; the result
must be a valid git branch name, else 400 naming branchTemplate); or after
how many failed runs in a row one of its issues is escalated to a person:
moved to blocked with its locks cleared, a comment listing each failed run,
and an issue.escalated event (RULES.md, Escalation; 0 never escalates).
Needs an admin token of the company; the change is audited as
company.updated.`,
		Example: `  clasp company update ACME --branch-template 'agents/{prefix}/{identifier}'
  clasp company update ACME --name "Acme Robotics Inc."
  clasp company update ACME --escalate-after-failures 5`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var req client.CompanyUpdateRequest
			if cmd.Flags().Changed("name") {
				req.Name = &name
			}
			if cmd.Flags().Changed("branch-template") {
				req.BranchTemplate = &branchTemplate
			}
			if cmd.Flags().Changed("escalate-after-failures") {
				if escalate < 0 || escalate > clasp.MaxEscalateAfterFailures {
					return usageErr(fmt.Errorf("--escalate-after-failures must be from 0 (never) to %d, not %d", clasp.MaxEscalateAfterFailures, escalate))
				}
				req.EscalateAfterFailures = &escalate
			}
			if req.Name == nil && req.BranchTemplate == nil && req.EscalateAfterFailures == nil {
				return usageErr(errors.New("nothing to change: give --name, --branch-template or --escalate-after-failures"))
			}
			id, err := a.resolveCompany(cmd.Context(), args[0], "COMPANY")
			if err != nil {
				return err
			}
			co, err := a.client().CompanyUpdate(cmd.Context(), id, req)
			if err != nil {
				return err
			}
			return a.emit(co, func(w io.Writer) { printCompany(w, co) })
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "the new name")
	cmd.Flags().StringVar(&branchTemplate, "branch-template", "", "the git branch of each issue's work: {identifier} (required) and {prefix} are replaced")
	cmd.Flags().IntVar(&escalate, "escalate-after-failures", clasp.DefaultEscalateAfterFailures, "escalate after this many failed runs in a row; 0 never")
	return cmd
}

func (a *app) newCompanyListCmd() *cobra.Command {
	var (
		lf       listFlags
		archived bool
	)
	cmd := &cobra.Command{
		Use:     "list [--archived]",
		Short:   "List companies, oldest first",
		Example: "  clasp company list --json\n  clasp company list --archived",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			list := a.client().CompanyList
			if archived {
				list = a.client().CompanyListIncludingArchived
			}
			first, err := list(ctx, client.ListParams{Limit: lf.limit, Cursor: lf.cursor})
			if err != nil {
				return err
			}
			items, next, err := collect(ctx, first, lf.all)
			if err != nil {
				return err
			}
			return emitList(a, items, next, printCompanies)
		},
	}
	lf.add(cmd)
	cmd.Flags().BoolVar(&archived, "archived", false, "list the archived companies too")
	return cmd
}

func (a *app) newCompanyShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "show COMPANY",
		Short:   "Show a company (by id, issue prefix or name)",
		Example: "  clasp company show ACME\n  clasp company show 0b6c...e1 --json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := a.resolveCompany(cmd.Context(), args[0], "COMPANY")
			if err != nil {
				return err
			}
			co, err := a.client().CompanyGet(cmd.Context(), id)
			if err != nil {
				return err
			}
			return a.emit(co, func(w io.Writer) { printCompany(w, co) })
		},
	}
}

// newCompanyArchiveCmd is `company archive` (archive true) or `company
// unarchive` (false).
func (a *app) newCompanyArchiveCmd(archive bool) *cobra.Command {
	use, short, long := "archive COMPANY", "Archive a company: hide it from the list and the board's picker",
		`Archive a company (an admin's token). It is left out of `+"`clasp company list`"+`
and the board's company picker; its agents, issues, runs and activity stay as
they are, and agents holding its keys keep working (terminate them with
`+"`clasp agent terminate`"+` to stop them). `+"`clasp company unarchive`"+` restores it.
Archiving an archived company changes nothing.`
	if !archive {
		use, short, long = "unarchive COMPANY", "Restore an archived company to the list",
			`Restore an archived company to `+"`clasp company list`"+` and the board's picker (an
admin's token). Restoring a company that is not archived changes nothing.`
	}
	return &cobra.Command{
		Use:     use,
		Short:   short,
		Long:    long,
		Example: "  clasp company " + strings.Fields(use)[0] + " ACME",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			id, err := a.resolveCompany(ctx, args[0], "COMPANY")
			if err != nil {
				return err
			}
			do := a.client().CompanyUnarchive
			if archive {
				do = a.client().CompanyArchive
			}
			co, err := do(ctx, id)
			if err != nil {
				return err
			}
			return a.emit(co, func(w io.Writer) {
				if co.ArchivedAt != nil {
					fmt.Fprintf(w, "Company %s (%s) is archived since %s; `clasp company unarchive %s` restores it.\n",
						co.IssuePrefix, co.Name, fmtTime(*co.ArchivedAt), co.IssuePrefix)
					return
				}
				fmt.Fprintf(w, "Company %s (%s) is in the list.\n", co.IssuePrefix, co.Name)
			})
		},
	}
}
