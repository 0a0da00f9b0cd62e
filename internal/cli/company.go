package cli

import (
	"errors"
	"fmt"
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
  clasp company show <company-id> --json`)
	g.AddCommand(a.newCompanyCreateCmd(), a.newCompanyListCmd(), a.newCompanyShowCmd(), a.newCompanyUpdateCmd())
	return g
}

func (a *app) newCompanyCreateCmd() *cobra.Command {
	var prefix string
	var escalate int
	cmd := &cobra.Command{
		Use:   "create NAME [--prefix PREFIX] [--escalate-after-failures N]",
		Short: "Create a company",
		Long: `Create a company. Its issues are identified PREFIX-1, PREFIX-2, ...; the
prefix is 2-10 upper-case letters and unique across companies (a taken prefix
answers 409 already_exists, exit code 3). Without --prefix the server derives
one from the name: its first three letters upper-cased ("Acme Robotics": ACM),
else longer ones (ACME, ...) when that is taken; the company printed shows it.`,
		Example: `  clasp company create "Acme Robotics" --prefix ACME
  clasp company create "Beta Labs"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("prefix") && prefix == "" {
				return usageErr(errors.New("--prefix is empty: give 2-10 upper-case letters, or leave --prefix out to have one derived from the name"))
			}
			req := client.CompanyCreateRequest{Name: args[0], IssuePrefix: prefix}
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
	cmd.Flags().IntVar(&escalate, "escalate-after-failures", clasp.DefaultEscalateAfterFailures, "escalate an issue to a person (block it, comment, issue.escalated) after this many runs of it in a row fail; 0 never")
	return cmd
}

func (a *app) newCompanyUpdateCmd() *cobra.Command {
	var company string
	var escalate int
	cmd := &cobra.Command{
		Use:   "update --company COMPANY --escalate-after-failures N",
		Short: "Change a company's settings",
		Long: `Change after how many failed runs in a row an issue of the company is escalated
to a person: moved to blocked with its locks cleared, a comment listing each
failed run, and an issue.escalated event (RULES.md, Escalation). 0 never
escalates. The change is audited as company.updated.`,
		Example: `  clasp company update --company ACME --escalate-after-failures 5`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("escalate-after-failures") {
				return usageErr(errors.New("nothing to change: give --escalate-after-failures N (0 never escalates)"))
			}
			if escalate < 0 || escalate > clasp.MaxEscalateAfterFailures {
				return usageErr(fmt.Errorf("--escalate-after-failures must be from 0 (never) to %d, not %d", clasp.MaxEscalateAfterFailures, escalate))
			}
			id, err := a.resolveCompany(cmd.Context(), company, "--company")
			if err != nil {
				return err
			}
			co, err := a.client().CompanyUpdate(cmd.Context(), id, client.CompanyUpdateRequest{EscalateAfterFailures: &escalate})
			if err != nil {
				return err
			}
			return a.emit(co, func(w io.Writer) { printCompany(w, co) })
		},
	}
	cmd.Flags().StringVar(&company, "company", "", "the company: its id, issue prefix or name (required)")
	cmd.Flags().IntVar(&escalate, "escalate-after-failures", clasp.DefaultEscalateAfterFailures, "escalate after this many failed runs in a row; 0 never")
	_ = cmd.MarkFlagRequired("company")
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
