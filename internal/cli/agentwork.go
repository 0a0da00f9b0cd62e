package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/clasp-dev/clasp/client"
	"github.com/clasp-dev/clasp/internal/swarm"
)

// newAgentWorkCmd is `clasp agent work`: one real OS process acting as one
// agent, the process `clasp swarm` launches (package swarm, Worker).
func (a *app) newAgentWorkCmd() *cobra.Command {
	var slow time.Duration
	var noClaim, oneRun, viaMCP bool
	var gitDir, gitRemote, gitMain string
	cmd := &cobra.Command{
		Use:   "work",
		Short: "Work issues as one agent until none is left (the swarm's agent process)",
		Long: `Work issues as the agent whose API key is $` + EnvToken + ` (or --token), on the server
at $` + EnvURL + ` (or --url), until there is no work left. The URL may be a
comma-separated list of replicas on one database: requests go to the first and
move to the next whenever a connection cannot be made.

Each turn opens a run, claims an issue (claim-next: the most urgent todo issue
that is the agent's or unassigned, or an issue of the agent whose holder died,
picked and checked out in one call; with --no-claim, the old way: the inbox
first, then an unassigned todo issue picked at random on the first page, each
tried by checkout), computes the
SHA-256 of the file whose absolute path is the issue's description while
heartbeating the run, then writes the comment "sha256 <hex>" and status done in
one atomic PATCH, and finishes the run.

Work that fails (the description names no readable file, or with --git the
git work, its worktree, commit or push, fails) never marks the
issue done: one atomic PATCH writes the comment "work failed: <why>" and sets
the issue blocked, which releases its lock and keeps its assignee, so a human
sees it on the board and in the agent's inbox, and no claim takes it again
(claims take todo issues); the run is finished failed with the reason. Fix the
cause and set the issue back to todo to have it worked again.

It prints one machine-readable line per event on stdout (event=checked_out
issue=ABC-3 run=<id> ..., event=conflict, event=done, event=blocked,
event=exit ...) and human logs on stderr. It exits 0 when two looks in a row
find no work, or on SIGTERM once the issue in hand is done and its run
finished, provided no work failed; 1 when some work failed (the issues left
blocked are named, event=exit reason=work_failed), or the server stays
unreachable or refuses the key.

With --git DIR each claim works in its own git worktree of DIR,
DIR/.clasp-worktrees/<identifier>@<epoch>, on the issue's branch, the one the
company's branch template names (default clasp/{identifier}), made from DIR's
HEAD, or from the branch's tip when a previous holder left work there; it
writes the result to results/<identifier> and commits it with the trailer
"Clasp-Issue: <identifier>@<epoch>" before marking the issue done
(event=committed). A worktree of an older epoch of the same issue (a superseded
hold on this machine) is removed first, with a log line; one of a newer epoch
means this hold is superseded, and its work fails. A DIR that is not a git
repository with a commit is refused at startup, before any claim (exit 2).

With --one-run it is the process of a server-managed agent (clasp swarm
--managed): it works at most one issue in the run the server started
($CLASP_RUN_ID, token $CLASP_API_KEY) and exits 0 (1 when that work failed);
the server ends the run.`,
		Example: `  CLASP_URL=http://127.0.0.1:3100 CLASP_TOKEN=clasp_ak_... clasp agent work --slow 200ms`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			token := a.bearer()
			url := firstNonEmpty(a.baseURL, a.url, a.getenv(EnvURL), DefaultURL)
			runID, issueID := "", ""
			if oneRun {
				// A server-managed run: the scheduler passes the run and
				// its token.
				token = firstNonEmpty(a.token, a.getenv("CLASP_API_KEY"))
				url = firstNonEmpty(a.url, a.getenv("CLASP_API_URL"), url)
				runID, issueID = a.getenv("CLASP_RUN_ID"), firstNonEmpty(a.getenv("CLASP_ISSUE_ID"), a.getenv("PAPERCLIP_TASK_ID"))
				if runID == "" {
					return usageErr(errors.New("--one-run needs CLASP_RUN_ID (run it as a server-managed agent's process)"))
				}
			}
			if token == "" {
				return usageErr(errors.New("an agent API key is required (--token or " + EnvToken + ")"))
			}
			if gitRemote != "" && gitDir == "" {
				return usageErr(errors.New("--git-remote needs --git DIR (the directory of the clone)"))
			}
			if gitDir != "" {
				// Before any claim: every issue claimed with a DIR no
				// worktree can be made in would fail and be left blocked.
				if err := swarm.CheckGitDir(cmd.Context(), gitDir, gitRemote); err != nil {
					return usageErr(fmt.Errorf("--git: %w", err))
				}
			}
			// cmd/clasp ends the context on SIGTERM and SIGINT: the worker
			// then completes the issue in hand, finishes its run and returns.
			var hc *http.Client
			if ca := a.caFile(); ca != "" {
				var err error
				if hc, err = client.NewHTTPClient(ca); err != nil {
					return usageErr(fmt.Errorf("--ca-cert: %w", err))
				}
				hc.Timeout = 30 * time.Second
			}
			w := swarm.NewWorker(swarm.WorkerConfig{
				HTTPClient: hc,
				URL:        url,
				Token:      token,
				RunID:      runID,
				IssueID:    issueID,
				Slow:       slow,
				GitDir:     gitDir,
				GitRemote:  gitRemote,
				GitMain:    gitMain,
				NoClaim:    noClaim,
				Events:     a.stdout,
				Log:        slog.New(slog.NewTextHandler(a.stderr, nil)),
			})
			if viaMCP {
				if oneRun || noClaim {
					return usageErr(errors.New("--mcp excludes --one-run and --no-claim"))
				}
				exe, err := os.Executable()
				if err != nil {
					return fmt.Errorf("find own executable for clasp mcp: %w", err)
				}
				return w.RunMCP(cmd.Context(), []string{exe, "mcp"})
			}
			return w.Run(cmd.Context())
		},
	}
	cmd.Flags().DurationVar(&slow, "slow", 0, "stretch the work on each issue to at least this long (e.g. 200ms)")
	cmd.Flags().StringVar(&gitDir, "git", "", "a git repository: each claim works in its own worktree of it (DIR/.clasp-worktrees/<issue>@<epoch>, on the branch of the company's template, default clasp/<issue>)\nand commits its result stamped 'Clasp-Issue: <issue>@<epoch>'; worktrees of superseded holds are removed")
	cmd.Flags().StringVar(&gitRemote, "git-remote", "", "with --git: a shared repository; DIR is cloned from it when missing, each claim starts from its --git-main branch,\nits branch is pushed before the issue is set done (a refusal by the repository's gate drops the work)\nand the result is merged into --git-main after (rebase and push, again when another merge landed first)")
	cmd.Flags().StringVar(&gitMain, "git-main", "main", "with --git-remote: the branch results are merged into")
	cmd.Flags().BoolVar(&noClaim, "no-claim", false, "find work with inbox, list and checkout instead of claim-next")
	cmd.Flags().BoolVar(&viaMCP, "mcp", false, "work through the MCP tools of a 'clasp mcp' process started on a pipe (clasp swarm --mcp)")
	cmd.Flags().BoolVar(&oneRun, "one-run", false, "work at most one issue in the run $CLASP_RUN_ID with the run token $CLASP_API_KEY on $CLASP_API_URL\n(the process of a server-managed agent; $CLASP_ISSUE_ID (or $PAPERCLIP_TASK_ID), when set, is the issue to work, first)")
	return cmd
}
