package cli

import (
	"errors"
	"io"

	"github.com/spf13/cobra"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

func (a *app) newCompanyCmd() *cobra.Command {
	g := a.newGroup("company", "Create and read companies (tenants; board token)",
		`A company is a tenant: every agent, issue, run and activity row belongs to
exactly one. These commands need the board token (or a server started with
--local-trusted).`,
		`  clasp company create "Acme Robotics" --prefix ACME
  clasp company list
  clasp company show <company-id> --json
  clasp company update <company-id> --branch-template 'agents/{prefix}/{identifier}'`)
	g.AddCommand(a.newCompanyCreateCmd(), a.newCompanyUpdateCmd(), a.newCompanyListCmd(), a.newCompanyShowCmd())
	return g
}

func (a *app) newCompanyCreateCmd() *cobra.Command {
	var prefix, branchTemplate string
	cmd := &cobra.Command{
		Use:   "create NAME [--prefix PREFIX] [--branch-template TEMPLATE]",
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
			co, err := a.client().CompanyCreate(cmd.Context(), client.CompanyCreateRequest{Name: args[0], IssuePrefix: prefix, BranchTemplate: branchTemplate})
			if err != nil {
				return err
			}
			return a.emit(co, func(w io.Writer) { printCompany(w, co) })
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "issue identifier prefix, 2-10 upper-case letters (default: derived from the name by the server)")
	cmd.Flags().StringVar(&branchTemplate, "branch-template", "", "the git branch of each issue's work: {identifier} (required) and {prefix} are replaced (default "+clasp.DefaultBranchTemplate+")")
	return cmd
}

func (a *app) newCompanyUpdateCmd() *cobra.Command {
	var name, branchTemplate string
	cmd := &cobra.Command{
		Use:   "update COMPANY [--name NAME] [--branch-template TEMPLATE]",
		Short: "Rename a company or change its branch template",
		Long: `Change a company (its id, issue prefix or name): its name, or its branch
template, which names the git branch of each issue's work from the next
checkout or claim on ({identifier} required, {prefix} optional; the result
must be a valid git branch name, else 400 naming branchTemplate). Needs an
admin token of the company.`,
		Example: `  clasp company update <company-id> --branch-template 'agents/{prefix}/{identifier}'
  clasp company update <company-id> --name "Acme Robotics Inc."`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var req client.CompanyUpdateRequest
			if cmd.Flags().Changed("name") {
				req.Name = &name
			}
			if cmd.Flags().Changed("branch-template") {
				req.BranchTemplate = &branchTemplate
			}
			if req.Name == nil && req.BranchTemplate == nil {
				return usageErr(errors.New("nothing to change: give --name or --branch-template"))
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
	return cmd
}

func (a *app) newCompanyListCmd() *cobra.Command {
	var lf listFlags
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List companies, oldest first",
		Example: "  clasp company list --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			first, err := a.client().CompanyList(ctx, client.ListParams{Limit: lf.limit, Cursor: lf.cursor})
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
	return cmd
}

func (a *app) newCompanyShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "show COMPANY_ID",
		Short:   "Show a company",
		Example: "  clasp company show 0b6c...e1",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			co, err := a.client().CompanyGet(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.emit(co, func(w io.Writer) { printCompany(w, co) })
		},
	}
}
