package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

func (a *app) newRunCmd() *cobra.Command {
	g := a.newGroup("run", "Open, heartbeat, finish and read runs",
		`A run is one working session of an agent. 'run open' (with the agent's key)
starts one with a lease of the server's TTL and prints a run token bound to it;
every request that names the run renews the lease, and 'run heartbeat' does so
explicitly. A run whose lease expires is failed by the sweeper (lease_expired)
and its locks are freed. 'run finish' ends it and releases every lock it holds.`,
		`  CLASP_TOKEN=clasp_ak_... clasp run open --json
  clasp run heartbeat <run-id>
  clasp run finish <run-id> --status succeeded`)
	g.AddCommand(a.newRunOpenCmd(), a.newRunHeartbeatCmd(), a.newRunFinishCmd(), a.newRunShowCmd(), a.newRunListCmd(),
		a.newRunLogCmd(), a.newRunCancelCmd())
	return g
}

func (a *app) newRunOpenCmd() *cobra.Command {
	var issue, source, idemKey string
	cmd := &cobra.Command{
		Use:   "open",
		Short: "Open a run for the calling agent and print its run token",
		Long: `Open a self-reported run for the agent whose key is the bearer. It is running,
with a lease of the server's TTL. The answer includes a run token (clasp_rt_...):
use it as CLASP_TOKEN for the run's requests (the run is then implied), or keep
the agent key and set CLASP_RUN_ID to the run id.`,
		Example: `  CLASP_TOKEN=clasp_ak_... clasp run open
  RUN=$(clasp run open --json | jq -r .id)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if idemKey != "" {
				ctx = client.WithIdempotencyKey(ctx, idemKey)
			}
			r, err := a.client().RunOpen(ctx, client.RunOpenRequest{IssueID: issue, InvocationSource: source})
			if err != nil {
				return err
			}
			return a.emit(r, func(w io.Writer) {
				printRun(w, r, nil, a.runNames(ctx, r)) // a new run holds nothing
				if r.RunToken != "" {
					fmt.Fprintf(w, "\nRun token (shown only this once; valid while the run lives):\n%s\n", r.RunToken)
				}
				fmt.Fprintf(w, "\nexport %s=%s\n", EnvRunID, r.ID)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&issue, "issue", "", "issue (UUID or identifier) the run is for")
	f.StringVar(&source, "source", "", "invocation source recorded on the run (default self)")
	f.StringVar(&idemKey, "idempotency-key", "", "Idempotency-Key header: repeats with the same key open nothing new")
	return cmd
}

func (a *app) newRunHeartbeatCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "heartbeat [RUN_ID]",
		Short: "Renew a run's lease (exit 3 if the run is no longer live)",
		Example: `  clasp run heartbeat <run-id>
  CLASP_RUN_ID=<run-id> clasp run heartbeat`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := a.runRef(args)
			if err != nil {
				return err
			}
			r, err := a.client().RunHeartbeat(cmd.Context(), id)
			if err != nil {
				return err
			}
			return a.emit(r, func(w io.Writer) {
				fmt.Fprintf(w, "Run %s %s, lease expires %s.\n", r.ID, r.Status, optTime(r.LeaseExpiresAt))
			})
		},
	}
}

func (a *app) newRunFinishCmd() *cobra.Command {
	var status, errMsg string
	var exitCode int
	cmd := &cobra.Command{
		Use:   "finish [RUN_ID] [--status succeeded|failed|cancelled|timed_out]",
		Short: "End a run and release every lock it holds",
		Long: `End a run with a terminal status (default succeeded). Every issue lock the run
holds is released in the same transaction. Finishing a run that already ended
exits with code 3 (run_not_live).`,
		Example: `  clasp run finish <run-id>
  clasp run finish <run-id> --status failed --exit-code 2 --error "tests failed"`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := a.runRef(args)
			if err != nil {
				return err
			}
			st := clasp.RunStatus(status)
			if !st.Terminal() {
				return usageErr(fmt.Errorf("--status must be succeeded, failed, cancelled or timed_out, not %q", status))
			}
			req := client.RunFinishRequest{Status: st}
			if cmd.Flags().Changed("exit-code") {
				req.ExitCode = &exitCode
			}
			if cmd.Flags().Changed("error") {
				req.Error = &errMsg
			}
			r, err := a.client().RunFinish(cmd.Context(), id, req)
			if err != nil {
				return err
			}
			return a.emit(r, func(w io.Writer) { fmt.Fprintf(w, "Run %s %s.\n", r.ID, r.Status) })
		},
	}
	f := cmd.Flags()
	f.StringVar(&status, "status", string(clasp.RunSucceeded), "succeeded, failed, cancelled or timed_out")
	f.IntVar(&exitCode, "exit-code", 0, "process exit code to record")
	f.StringVar(&errMsg, "error", "", "error message to record")
	return cmd
}

func (a *app) newRunShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "show [RUN_ID]",
		Short:   "Show a run",
		Example: "  clasp run show <run-id> --json",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := a.runRef(args)
			if err != nil {
				return err
			}
			r, err := a.client().RunGet(cmd.Context(), id)
			if err != nil {
				return err
			}
			n := a.runNames(cmd.Context(), r)
			var held []string
			if !a.jsonOut && !r.Status.Terminal() {
				// The issues whose locks name the run (a run's end releases them).
				if byRun, err := heldByRun(cmd.Context(), a.client(), r.CompanyID, n); err == nil {
					held = byRun[r.ID]
				}
			}
			return a.emit(r, func(w io.Writer) { printRun(w, r, held, n) })
		},
	}
}

func (a *app) newRunListCmd() *cobra.Command {
	var company, status, agent string
	var lf listFlags
	cmd := &cobra.Command{
		Use:     "list --company COMPANY_ID",
		Short:   "List a company's runs, newest first",
		Example: "  clasp run list --company <company-id> --status running",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var sts []clasp.RunStatus
			for _, s := range strings.Split(status, ",") {
				if s = strings.TrimSpace(s); s == "" {
					continue
				}
				st := clasp.RunStatus(s)
				if !st.Valid() {
					return usageErr(fmt.Errorf("unknown run status %q (want queued, running, succeeded, failed, cancelled or timed_out)", s))
				}
				sts = append(sts, st)
			}
			c := a.client()
			cid, err := a.companyID(ctx, c, company)
			if err != nil {
				return err
			}
			if agent, err = a.resolveAgent(ctx, cid, agent, "--agent"); err != nil {
				return err
			}
			first, err := c.RunList(ctx, cid, client.RunListParams{Statuses: sts, AgentID: agent, Limit: lf.limit, Cursor: lf.cursor})
			if err != nil {
				return err
			}
			items, next, err := collect(ctx, first, lf.all)
			if err != nil {
				return err
			}
			var held map[string][]string
			var n *names
			if !a.jsonOut {
				n = a.names(0)
				if held, err = heldByRun(ctx, c, cid, n); err != nil {
					return err
				}
				if len(items) > 0 {
					n.learnAgents(ctx, cid, "")
				}
				var ids []string
				for _, r := range items {
					if r.IssueID != nil && len(held[r.ID]) == 0 {
						ids = append(ids, *r.IssueID)
					}
				}
				n.learnIssues(ctx, cid, ids)
			}
			return emitList(a, items, next, func(w io.Writer, rs []*clasp.Run) { printRuns(w, rs, held, n) })
		},
	}
	f := cmd.Flags()
	f.StringVar(&company, "company", "", "company: its id, issue prefix or name (default $"+EnvCompanyID+", or the calling agent's)")
	f.StringVar(&status, "status", "", "comma-separated run statuses")
	f.StringVar(&agent, "agent", "", "only runs of this agent (id or name)")
	lf.add(cmd)
	return cmd
}

// heldByRun maps each run id to the identifiers of the issues of company
// cid whose checkout or execution lock names it, from the issues of the
// open statuses, where locks live (pages of maxLimit, up to
// maxListedIssues issues). n learns the identifiers of the issues listed.
func heldByRun(ctx context.Context, c *client.Client, cid string, n *names) (map[string][]string, error) {
	page, err := c.IssueList(ctx, cid, client.IssueListParams{
		Statuses: []clasp.IssueStatus{clasp.IssueBacklog, clasp.IssueTodo, clasp.IssueInProgress, clasp.IssueInReview, clasp.IssueBlocked},
		Limit:    maxLimit,
	})
	if err != nil {
		return nil, err
	}
	held := map[string][]string{}
	for read := 0; ; {
		for _, iss := range page.Items {
			n.knowIssue(iss.CompanyID, iss.ID, iss.Identifier)
			for _, id := range []*string{iss.CheckoutRunID, iss.ExecutionRunID} {
				if id != nil && !slices.Contains(held[*id], iss.Identifier) {
					held[*id] = append(held[*id], iss.Identifier)
				}
			}
		}
		if read += len(page.Items); !page.HasNext() || read >= maxListedIssues {
			break
		}
		if page, err = page.Next(ctx); err != nil {
			return nil, err
		}
	}
	return held, nil
}
