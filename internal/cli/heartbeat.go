package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// Commands of server-managed agents: clasp agent set-adapter,
// clasp agent wake, clasp run log, clasp run cancel.

// wholeSeconds converts a duration flag to whole seconds; a usage error for
// a negative or fractional duration.
func wholeSeconds(flag string, d time.Duration) (int, error) {
	if d < 0 || d%time.Second != 0 {
		return 0, usageErr(fmt.Errorf("--%s must be a whole number of seconds, 0 or more, not %s", flag, d))
	}
	return int(d / time.Second), nil
}

func (a *app) newAgentSetAdapterCmd() *cobra.Command {
	var (
		command, cwd              string
		args, env                 []string
		timeout, interval         time.Duration
		wakeOnAssign, clear, noHB bool
		maxConcurrent             int
	)
	cmd := &cobra.Command{
		Use:   "set-adapter AGENT_ID --command PATH [--arg A]... | --clear",
		Short: "Make the server run an agent as a local process (board)",
		Long: `Set the process adapter of an agent: the server then runs the agent itself.
When the agent is woken (on a timer every --heartbeat-interval, when an issue is
assigned to it with --wake-on-assignment, or by 'clasp agent wake'), the server
queues a run and starts --command (an absolute path on the server's machine:
the server looks up no PATH and resolves no relative path) with its --arg
values in --cwd, in its own process group, with the run's credentials in the
environment: CLASP_API_URL, CLASP_API_KEY (a key valid only for this run), CLASP_RUN_ID, CLASP_AGENT_ID,
CLASP_COMPANY_ID, CLASP_ISSUE_ID and CLASP_WAKE_REASON (and the same values as
PAPERCLIP_*). Exit 0 makes the run succeeded, another exit failed, a kill
process_lost (retried once); the run ends when --command itself exits, and the
rest of its process group gets SIGTERM, then SIGKILL, before it does; past
--timeout the process group gets SIGTERM, then SIGKILL, and the run is
timed_out. Without --cwd each run works in a fresh empty directory,
<data-dir>/runs/<runId> on the server, removed when its process group is gone;
a --cwd directory (absolute, existing) is used as is and kept. Output goes to
the run log ('clasp run log'). The run's process (its pid) is a small watcher,
this same clasp binary, that leads the process group, starts --command, writes
its stdout and stderr to the run log and records its exit status: a server that
crashes or restarts leaves both running, and the server that re-adopts the run
ends it by that exit status. --clear removes the adapter. Setting it replaces
the whole previous config.`,
		Example: `  clasp agent set-adapter <agent-id> --command /bin/sh --arg "$PWD/examples/shell-agent/agent.sh" \
      --env AGENT_DEBUG=1 --timeout 5m --heartbeat-interval 30s --wake-on-assignment
  clasp agent set-adapter <agent-id> --command /usr/local/go/bin/go --arg run --arg ./examples/goagent --cwd /src/clasp
  clasp agent set-adapter <agent-id> --clear`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, pos []string) error {
			var cfg *clasp.AdapterConfig
			if clear {
				for _, name := range []string{"command", "arg", "cwd", "env", "timeout", "heartbeat-interval", "wake-on-assignment", "max-concurrent", "disabled"} {
					if cmd.Flags().Changed(name) {
						return usageErr(fmt.Errorf("--clear takes no other adapter flag (got --%s)", name))
					}
				}
			} else {
				if command == "" {
					return usageErr(errors.New("--command is required (or --clear to remove the adapter)"))
				}
				to, err := wholeSeconds("timeout", timeout)
				if err != nil {
					return err
				}
				iv, err := wholeSeconds("heartbeat-interval", interval)
				if err != nil {
					return err
				}
				cfg = &clasp.AdapterConfig{Type: clasp.AdapterProcess, Command: command, Args: args, Cwd: cwd, TimeoutSec: to,
					Heartbeat: clasp.HeartbeatConfig{Enabled: !noHB, IntervalSec: iv, WakeOnAssignment: wakeOnAssign, MaxConcurrentRuns: maxConcurrent}}
				for _, kv := range env {
					k, v, ok := strings.Cut(kv, "=")
					if !ok || k == "" {
						return usageErr(fmt.Errorf("--env takes NAME=VALUE, not %q", kv))
					}
					if cfg.Env == nil {
						cfg.Env = map[string]string{}
					}
					cfg.Env[k] = v
				}
			}
			id, err := a.resolveAgent(cmd.Context(), "", pos[0], "AGENT")
			if err != nil {
				return err
			}
			ag, err := a.client().AgentSetAdapter(cmd.Context(), id, cfg)
			if err != nil {
				return err
			}
			return a.emit(ag, func(w io.Writer) { printAgentAdapter(w, ag, a.detailNames(cmd.Context(), ag.CompanyID)) })
		},
	}
	f := cmd.Flags()
	f.StringVar(&command, "command", "", "absolute path of the program to run, on the server's machine (no PATH lookup)")
	f.StringArrayVar(&args, "arg", nil, "an argument of the command (repeat for more)")
	f.StringVar(&cwd, "cwd", "", "absolute working directory of the process, kept across runs (default: a fresh <data-dir>/runs/<runId>, removed after the run)")
	f.StringArrayVar(&env, "env", nil, "NAME=VALUE added to the process environment (repeat for more)")
	f.DurationVar(&timeout, "timeout", 0, "longest a run may take, in whole seconds, e.g. 10m (0: no limit)")
	f.DurationVar(&interval, "heartbeat-interval", 0, "wake the agent this often, e.g. 30s (0: no timer wakes)")
	f.BoolVar(&wakeOnAssign, "wake-on-assignment", false, "wake the agent when an issue is assigned to it")
	f.IntVar(&maxConcurrent, "max-concurrent", 1, "runs of this agent at once (1-64)")
	f.BoolVar(&noHB, "disabled", false, "keep the config but do not wake or start the agent")
	f.BoolVar(&clear, "clear", false, "remove the adapter: the server no longer runs this agent")
	return cmd
}

// printAgentAdapter prints an agent (its company by the prefix n knows)
// and its adapter config.
func printAgentAdapter(w io.Writer, ag *client.AgentWithAdapter, n *names) {
	printAgent(w, &ag.Agent, n)
	c := ag.Adapter
	if c == nil {
		fmt.Fprintln(w, "Adapter:      none (the agent runs itself)")
		return
	}
	fmt.Fprintf(w, "Adapter:      %s %s\n", c.Type, strings.Join(append([]string{c.Command}, c.Args...), " "))
	if c.Cwd != "" {
		fmt.Fprintf(w, "  cwd:        %s\n", c.Cwd)
	}
	if len(c.Env) > 0 {
		fmt.Fprintf(w, "  env:        %d variable(s)\n", len(c.Env))
	}
	fmt.Fprintf(w, "  timeout:    %s\n", orNoLimit(c.TimeoutSec))
	fmt.Fprintf(w, "  heartbeat:  enabled %t, interval %s, wake on assignment %t, max concurrent runs %d\n",
		c.Heartbeat.Enabled, orNoLimit(c.Heartbeat.IntervalSec), c.Heartbeat.WakeOnAssignment, c.Heartbeat.MaxConcurrentRuns)
}

func orNoLimit(sec int) string {
	if sec == 0 {
		return "none"
	}
	return (time.Duration(sec) * time.Second).String()
}

func (a *app) newAgentWakeCmd() *cobra.Command {
	var issue, reason, idemKey string
	cmd := &cobra.Command{
		Use:   "wake AGENT_ID [--issue ISSUE] [--reason on_demand]",
		Short: "Wake a server-managed agent: queue a run (board, or the agent itself)",
		Long: `Ask the server to run an agent that has a process adapter (set-adapter). The
answer says what the wake did: queued (a new run), coalesced (the agent already
has a queued run for the issue), deferred (another agent's live run holds the
issue; the wake is promoted when that run ends) or skipped (the agent is paused
or terminated, or has no adapter: the answer says which and what to do, and
the exit status is 1 since nothing will run). The same --idempotency-key never
makes two runs.`,
		Example: `  clasp agent wake <agent-id>
  clasp agent wake <agent-id> --issue ENG-12 --idempotency-key deploy-42`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := a.resolveAgent(cmd.Context(), "", args[0], "AGENT")
			if err != nil {
				return err
			}
			w, err := a.client().AgentWake(cmd.Context(), id, client.WakeRequest{Reason: reason, IssueID: issue, IdempotencyKey: idemKey})
			if err != nil {
				return err
			}
			err = a.emit(w, func(out io.Writer) {
				fmt.Fprintf(out, "Wake %s: %s", w.WakeID, w.Status)
				if w.RunID != nil {
					fmt.Fprintf(out, ", run %s", *w.RunID)
				}
				if w.BlockedByRunID != nil {
					fmt.Fprintf(out, ", waiting for run %s", *w.BlockedByRunID)
				}
				if w.Replayed {
					fmt.Fprint(out, " (an earlier wake with this key)")
				}
				if w.SkipMessage != "" {
					fmt.Fprintf(out, ": %s\n", w.SkipMessage)
					return
				}
				fmt.Fprintln(out, ".")
			})
			if err == nil && w.Status == "skipped" {
				// Nothing will run: say so in the exit status (the
				// answer, with its reason, is printed above).
				return &exitError{Code: ExitError}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&issue, "issue", "", "issue (UUID or identifier) the run is for")
	f.StringVar(&reason, "reason", "", "on_demand (default), timer or assignment")
	f.StringVar(&idemKey, "idempotency-key", "", "repeats with the same key make no new run")
	return cmd
}

// logPollInterval is how often 'clasp run log --follow' asks for more.
const logPollInterval = 500 * time.Millisecond

func (a *app) newRunLogCmd() *cobra.Command {
	var follow bool
	var offset int64
	cmd := &cobra.Command{
		Use:   "log RUN_ID [--follow]",
		Short: "Print the output of a server-managed run (board, or the run's agent)",
		Long: `Print what a run's process wrote to stdout and stderr, as captured by the server
(capped in size; also while the server was down or restarting). --follow keeps
printing new output until the run ends.
Runs the server did not start have no log (404 not_found, exit 1).`,
		Example: `  clasp run log <run-id>
  clasp run log <run-id> --follow`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if offset < 0 {
				return usageErr(fmt.Errorf("--offset must be 0 or more bytes, got %d", offset))
			}
			id, err := a.runRef(args)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			c := a.client()
			for {
				chunk, err := c.RunLog(ctx, id, offset)
				if err != nil {
					return err
				}
				if _, err := a.stdout.Write(chunk.Data); err != nil {
					return err
				}
				offset += int64(len(chunk.Data))
				if !follow || (chunk.Status.Terminal() && offset >= chunk.Size) {
					return nil
				}
				if len(chunk.Data) > 0 && offset < chunk.Size {
					continue
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(logPollInterval):
				}
			}
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing output until the run ends")
	cmd.Flags().Int64Var(&offset, "offset", 0, "start at this byte of the log")
	return cmd
}

func (a *app) newRunCancelCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel RUN_ID",
		Short: "Cancel a live run (board)",
		Long: `Cancel a queued or running run. A process the server runs gets SIGTERM, then
SIGKILL after a grace period, and the run ends cancelled once it is gone; other
runs end cancelled at once. Either way every lock the run holds is released.
Cancelling a run that already ended exits with code 3 (run_not_live).`,
		Example: "  clasp run cancel <run-id>",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := a.client().RunCancel(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.emit(r, func(w io.Writer) {
				if r.Status == clasp.RunRunning {
					fmt.Fprintf(w, "Run %s is being stopped (SIGTERM, then SIGKILL); it ends cancelled.\n", r.ID)
					return
				}
				fmt.Fprintf(w, "Run %s %s.\n", r.ID, r.Status)
			})
		},
	}
}
