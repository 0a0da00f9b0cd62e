package cli

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

func (a *app) newAgentCmd() *cobra.Command {
	g := a.newGroup("agent", "Manage agents and their API keys",
		`An agent is a worker identity in a company. The board creates agents and
their API keys, and pauses, resumes or terminates them (terminating is final:
it revokes every key, cancels the agent's runs, releasing their locks, and
unassigns its issues that are not done or cancelled, in_progress ones back to
todo, so that any agent can take them). An agent, authenticated with its key or a run token, can read
itself (agent me) and its inbox (agent inbox).`,
		`  clasp agent create builder-1 --company <company-id> --role engineer
  clasp agent key create <agent-id>          # prints the key once
  CLASP_TOKEN=clasp_ak_... clasp agent inbox`)
	key := &cobra.Command{
		Use:   "key",
		Short: "Create, list and revoke agent API keys (board)",
		Long: `Agent API keys authenticate agents ("Authorization: Bearer clasp_ak_...").
The server stores only their hash: the key is printed once, by 'key create'.`,
		Example: `  clasp agent key create <agent-id>
  clasp agent key list <agent-id>
  clasp agent key revoke <agent-id> <key-id>`,
		RunE: groupRunE,
	}
	key.AddCommand(a.newAgentKeyCreateCmd(), a.newAgentKeyListCmd(), a.newAgentKeyRevokeCmd())
	g.AddCommand(
		a.newAgentCreateCmd(),
		a.newAgentListCmd(),
		a.newAgentShowCmd(),
		a.newAgentStatusCmd("pause", clasp.AgentPaused, "Pause an agent (status paused)"),
		a.newAgentStatusCmd("resume", clasp.AgentActive, "Resume a paused agent (status active)"),
		a.newAgentStatusCmd("terminate", clasp.AgentTerminated, "Terminate an agent (final): its keys answer 401, its runs are cancelled, its open issues go back unassigned"),
		a.newAgentMeCmd(),
		a.newAgentInboxCmd(),
		a.newAgentSetAdapterCmd(),
		a.newAgentWakeCmd(),
		key,
	)
	return g
}

func (a *app) newAgentCreateCmd() *cobra.Command {
	var company, role string
	cmd := &cobra.Command{
		Use:   "create NAME --company COMPANY_ID",
		Short: "Create an agent (board)",
		Long: `Create an active agent in a company. Names are unique per company, compared
trimmed and lower-cased (a taken name answers 409 already_exists, exit code 3).`,
		Example: `  clasp agent create builder-1 --company <company-id> --role engineer`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c := a.client()
			cid, err := a.companyID(ctx, c, company)
			if err != nil {
				return err
			}
			ag, err := c.AgentCreate(ctx, cid, client.AgentCreateRequest{Name: args[0], Role: role})
			if err != nil {
				return err
			}
			return a.emit(ag, func(w io.Writer) { printAgent(w, ag, a.detailNames(ctx, ag.CompanyID)) })
		},
	}
	cmd.Flags().StringVar(&company, "company", "", "company: its id, issue prefix or name (default $"+EnvCompanyID+")")
	cmd.Flags().StringVar(&role, "role", "", "free-text role, e.g. engineer")
	return cmd
}

func (a *app) newAgentListCmd() *cobra.Command {
	var company string
	var lf listFlags
	cmd := &cobra.Command{
		Use:     "list --company COMPANY_ID",
		Short:   "List the agents of a company (board)",
		Example: "  clasp agent list --company <company-id>",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c := a.client()
			cid, err := a.companyID(ctx, c, company)
			if err != nil {
				return err
			}
			first, err := c.AgentList(ctx, cid, client.ListParams{Limit: lf.limit, Cursor: lf.cursor})
			if err != nil {
				return err
			}
			items, next, err := collect(ctx, first, lf.all)
			if err != nil {
				return err
			}
			return emitList(a, items, next, printAgents)
		},
	}
	cmd.Flags().StringVar(&company, "company", "", "company: its id, issue prefix or name (default $"+EnvCompanyID+")")
	lf.add(cmd)
	return cmd
}

func (a *app) newAgentShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "show AGENT_ID",
		Short:   "Show an agent (board)",
		Example: "  clasp agent show <agent-id> --json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := a.resolveAgent(cmd.Context(), "", args[0], "AGENT")
			if err != nil {
				return err
			}
			ag, err := a.client().AgentAdapter(cmd.Context(), id)
			if err != nil {
				return err
			}
			return a.emit(ag, func(w io.Writer) {
				printAgent(w, &ag.Agent, a.detailNames(cmd.Context(), ag.CompanyID))
				printAdapterLine(w, ag.Adapter)
			})
		},
	}
}

// printAdapterLine prints the adapter of 'agent show' (none when unset).
func printAdapterLine(w io.Writer, cfg *clasp.AdapterConfig) {
	if cfg == nil {
		fields(w, "Adapter", "(none)")
		return
	}
	fields(w, "Adapter", cfg.Type+": "+strings.Join(append([]string{cfg.Command}, cfg.Args...), " "))
}

// newAgentStatusCmd returns pause, resume or terminate: a PATCH of the
// agent's status.
//
// terminate cannot be undone: on a terminal it asks first; --yes skips the
// question, and without --yes it refuses when stdin is not a terminal.
func (a *app) newAgentStatusCmd(use string, status clasp.AgentStatus, short string) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:     use + " AGENT_ID",
		Short:   short + " (board)",
		Example: "  clasp agent " + use + " <agent-id>",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := a.client()
			id, err := a.resolveAgent(cmd.Context(), "", args[0], "AGENT")
			if err != nil {
				return err
			}
			if status == clasp.AgentTerminated && !yes {
				if !a.stdinIsTerminal() {
					return usageErr(fmt.Errorf("terminating agent %s cannot be undone; stdin is not a terminal to confirm on, so pass --yes to terminate it", id))
				}
				ok, err := a.confirm(fmt.Sprintf("Terminate agent %s? Its keys stop working, its runs are cancelled and its open issues go back unassigned; this cannot be undone. [y/N] ", id))
				if err != nil {
					return err
				}
				if !ok {
					return &exitError{Code: ExitError, Err: fmt.Errorf("agent %s not terminated: not confirmed", id)}
				}
			}
			st := status
			ag, err := c.AgentUpdate(cmd.Context(), id, client.AgentUpdateRequest{Status: &st})
			if err != nil {
				return err
			}
			return a.emit(ag, func(w io.Writer) { printAgent(w, ag, a.detailNames(cmd.Context(), ag.CompanyID)) })
		},
	}
	if status == clasp.AgentTerminated {
		cmd.Long = short + ". This cannot be undone: on a terminal it asks first; --yes skips the question (needed when stdin is not a terminal)."
		cmd.Example = "  clasp agent terminate <agent-id>\n  clasp agent terminate <agent-id> --yes"
		cmd.Flags().BoolVarP(&yes, "yes", "y", false, "terminate without asking")
	}
	return cmd
}

// stdinIsTerminal reports whether the command's stdin is a terminal (a
// character device), where a question can be asked and answered.
func (a *app) stdinIsTerminal() bool {
	f, ok := a.stdin.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// confirm asks question on stderr and reads one line from stdin: true for
// "y" or "yes" (any case).
func (a *app) confirm(question string) (bool, error) {
	fmt.Fprint(a.stderr, question)
	line, err := bufio.NewReader(a.stdin).ReadString('\n')
	if err != nil && line == "" {
		return false, nil
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}

func (a *app) newAgentMeCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "me",
		Short:   "Show the calling agent (agent key or run token)",
		Example: "  CLASP_TOKEN=clasp_ak_... clasp agent me",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ag, err := a.client().Me(cmd.Context())
			if err != nil {
				return err
			}
			return a.emit(ag, func(w io.Writer) { printAgent(w, ag, a.detailNames(cmd.Context(), ag.CompanyID)) })
		},
	}
}

func (a *app) newAgentInboxCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "inbox",
		Short: "List the calling agent's open assigned issues (todo, in_progress, blocked)",
		Long: `List the issues assigned to the calling agent whose status is todo,
in_progress or blocked, most urgent first, with the run holding each one
(GET /api/agents/me/inbox-lite).`,
		Example: "  CLASP_TOKEN=clasp_ak_... clasp agent inbox",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			items, err := a.client().Inbox(cmd.Context())
			if err != nil {
				return err
			}
			return emitList(a, items, "", printInbox)
		},
	}
}

func (a *app) newAgentKeyCreateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "create AGENT_ID",
		Short: "Create an API key for an agent and print it once",
		Long: `Create an API key for an agent. The key itself is printed this once; the
server keeps only its hash. Give it to the agent as CLASP_TOKEN.`,
		Example: `  clasp agent key create <agent-id>
  clasp agent key create <agent-id> --json | jq -r .token`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := a.resolveAgent(cmd.Context(), "", args[0], "AGENT")
			if err != nil {
				return err
			}
			k, err := a.client().AgentKeyCreate(cmd.Context(), id)
			if err != nil {
				return err
			}
			return a.emit(k, func(w io.Writer) {
				printKey(w, k)
				fmt.Fprintf(w, "\nAPI key (shown only this once; store it now):\n%s\n", k.Token)
			})
		},
	}
}

func (a *app) newAgentKeyRevokeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke AGENT_ID KEY_ID",
		Short: "Revoke an agent's API key (it answers 401 from now on)",
		Long: `Revoke an agent's API key: requests with it answer 401 from now on on the
server that revokes it, and within 0.5 s on every other replica of the same
database (each believes a verified key for 0.5 s).

Run tokens of runs already opened with the key stay valid until those runs
end (a run token is a credential of its run, not of the key). If the key
leaked, also end the agent's live runs (clasp run cancel RUN_ID, or
clasp run finish), or terminate the agent, which ends all its runs and
revokes all its keys.`,
		Example: "  clasp agent key revoke <agent-id> <key-id>",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := a.resolveAgent(cmd.Context(), "", args[0], "AGENT")
			if err != nil {
				return err
			}
			k, err := a.client().AgentKeyRevoke(cmd.Context(), id, args[1])
			if err != nil {
				return err
			}
			if k == nil {
				k = &clasp.APIKey{ID: args[1], AgentID: id}
			}
			return a.emit(k, func(w io.Writer) {
				fmt.Fprintf(w, "Revoked key %s of agent %s.\n", k.ID, k.AgentID)
			})
		},
	}
}

func (a *app) newAgentKeyListCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "list AGENT_ID",
		Short:   "List an agent's API keys (prefixes only, never the secrets)",
		Example: "  clasp agent key list <agent-id>",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := a.resolveAgent(cmd.Context(), "", args[0], "AGENT")
			if err != nil {
				return err
			}
			ks, err := a.client().AgentKeyList(cmd.Context(), id)
			if err != nil {
				return err
			}
			return emitList(a, ks, "", printKeys)
		},
	}
}
