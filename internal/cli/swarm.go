package cli

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/clasp-dev/clasp/internal/swarm"
)

// newSwarmCmd is `clasp swarm` (package swarm, Run).
func (a *app) newSwarmCmd() *cobra.Command {
	var (
		cfg      swarm.Config
		jsonOut  bool
		agentCmd string
	)
	cmd := &cobra.Command{
		Use:   "swarm",
		Short: "Prove with real processes and SIGKILLs that no issue is ever worked twice",
		Long: `Start a clasp server on a fresh embedded SQLite database (or use --server), create
a company and --agents agents, file one todo issue per regular file under --dir
(skipping .git; the work of each issue is to compute the file's SHA-256), and
launch one 'clasp agent work' process per agent. Each time a process announces a
checkout, with probability --kill-rate the swarm SIGKILLs it at a random moment
of its work and starts a replacement for the same agent at once (--slow stretches
the work so that kills land mid-checkout).

With --database-url the swarm runs no embedded server: it starts --replicas
processes of 'clasp serve' against that PostgreSQL database (passed to them in
CLASP_DATABASE_URL), each on its own loopback port. The first replica creates
the board token on a fresh database and prints it, and the swarm reads it there;
the replicas need no copy of it, as they check tokens against the hash stored in
the database (on a database that already has a token, pass it with --token).
Each agent process gets the list of replicas, starting at a different one, and
moves to the next when it cannot connect. --kill-replica-every kills a random
replica with SIGKILL at that interval and restarts it on the same port while
the agents carry on.

With --managed the server runs the agents: each agent gets a process
adapter running 'clasp agent work --one-run' (one issue per server-managed run,
with the run's token), timer wakes every second, and the swarm wakes every agent
on demand until no issue is left. --kill-rate then SIGKILLs the process group
of a run seen running (its pid) at a random moment within --slow (default
100ms); the server's process-loss handling must fail the run (process_lost) and
queue its one retry, which carries the issue on.

With --agent-cmd each agent process runs that command line instead of 'clasp agent
work' (split at spaces, no shell; relative paths from the current directory),
such as "python3 examples/python-agent/agent.py" or "node
examples/typescript-agent/agent.mjs": it gets CLASP_URL and its agent's key in
CLASP_TOKEN and CLASP_API_KEY, and --slow when set; it must claim issues until
none is left, write the result comment "sha256 <hex>" with status done in one
write, and print "event=checked_out issue=<id> run=<id> epoch=<n>" lines on
stdout, which the kills are timed by.

With --mcp each agent process ('clasp agent work --mcp') works through the MCP
tools of a 'clasp mcp' process it starts on a pipe (claim_next_issue, then
update_issue_status done with the result); a SIGKILL of the agent kills its
'clasp mcp' too (parent death signal), so the session's run is left to its lease.

With --git the swarm creates a shared bare repository in its data directory,
with a first commit on main, and installs the gate as its pre-receive hook
('clasp gate install' with a gate token of the swarm's company). Each agent
process works in its own clone ('clasp agent work --git CLONE --git-remote
REPO'): a worktree per claim on the issue's branch, the result committed with
the stamp 'Clasp-Issue: <issue>@<epoch>', the branch pushed (the gate decides),
the issue set done, the result rebased onto main and pushed (again when
another merge landed first). Besides the kills, --freeze-rate of the checkouts
freeze their process (SIGSTOP) until its run is swept and its issue taken over
by a replacement process (bounded), then continue it (SIGCONT, also when the
swarm exits): the holder presumed dead wakes up and pushes, and the gate must
refuse it. The check adds: main holds exactly one result commit per issue,
stamped with the epoch that completed it, with the file's hash; each issue's
branch ends with the completing hold's commit; no push of a swept frozen hold
was accepted and, when there were such holds, stale pushes were refused; no
worktree served two runs. A result whose agent died between setting the issue
done and merging is merged by the swarm from the issue's branch (landed).

With --deps the swarm also files one issue per directory, blocked by (and the
parent of) the issues of its entries and assigned to the agents in turn; the
work on a directory is a hash over its entries' results, read from their result
comments, so a directory worked before its entries gives a wrong hash. The check
then adds: the root's result is the tree hash the swarm computes itself, no
issue entered in_progress or done before all its blockers were done, and every
directory's ready state woke its agent exactly once (issue_blockers_resolved).

When the work is over and the sweeper has failed the runs of the killed
processes, the swarm checks through the API: every issue done, exactly one
result comment per issue with the right hash, no lock left, no run left
running or queued, an activity log that accounts for every lock change, and
every checkout and result an agent saw acknowledged (its event lines) reflected
in the database. It prints a progress line on stderr about once a second, then
a report on stdout, and exits 1 if any check failed or the work timed out.`,
		Example: `  clasp swarm                                   # the current directory, 8 agents
  clasp swarm --dir /usr/share/doc --agents 16 --kill-rate 0.2 --slow 50ms
  clasp swarm --managed --agents 8 --kill-rate 0.2
  clasp swarm --deps --agents 8 --kill-rate 0.2       # directories wait for their entries
  clasp swarm --mcp --agents 8 --kill-rate 0.2
  clasp swarm --git --agents 8 --kill-rate 0.2 --freeze-rate 0.1 --lease-ttl 2s
  clasp swarm --agents 3 --kill-rate 0.2 --agent-cmd "python3 /src/clasp/examples/python-agent/agent.py"
  clasp swarm --server http://127.0.0.1:3100 --token clasp_bt_... --json
  clasp swarm --database-url postgres://clasp@127.0.0.1/clasp --replicas 3 --agents 16 --kill-rate 0.2 --kill-replica-every 5s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfg.KillRate < 0 || cfg.KillRate > 1 {
				return usageErr(errors.New("--kill-rate must be between 0 and 1"))
			}
			if cfg.DatabaseURL != "" && cfg.ServerURL != "" {
				return usageErr(errors.New("--database-url and --server exclude each other"))
			}
			if cfg.KillReplicaEvery > 0 && cfg.DatabaseURL == "" {
				return usageErr(errors.New("--kill-replica-every needs --database-url"))
			}
			if cfg.MCP && (cfg.Managed || cfg.DatabaseURL != "" || cfg.NoClaim) {
				return usageErr(errors.New("--mcp excludes --managed, --database-url and --no-claim"))
			}
			if len(cfg.ManagedCommand) > 0 && !cfg.Managed {
				return usageErr(errors.New("--agent-command needs --managed"))
			}
			if agentCmd != "" {
				if cfg.Managed || cfg.MCP || cfg.NoClaim || cfg.Deps {
					return usageErr(errors.New("--agent-cmd excludes --managed (see --agent-command), --mcp, --no-claim and --deps (its agents hash files, not directories)"))
				}
				if cfg.AgentCommand = strings.Fields(agentCmd); len(cfg.AgentCommand) == 0 {
					return usageErr(errors.New("--agent-cmd is empty"))
				}
			}
			if cfg.FreezeRate < 0 || cfg.FreezeRate > 1 {
				return usageErr(errors.New("--freeze-rate must be between 0 and 1"))
			}
			if !cfg.Git {
				if cmd.Flags().Changed("freeze-rate") && cfg.FreezeRate > 0 {
					return usageErr(errors.New("--freeze-rate needs --git"))
				}
				cfg.FreezeRate = 0
			}
			if cfg.Git && (cfg.Managed || cfg.MCP || cfg.Deps || agentCmd != "") {
				return usageErr(errors.New("--git excludes --managed, --mcp, --deps and --agent-cmd: its agents are 'clasp agent work --git' processes"))
			}
			if cfg.Replicas < 1 {
				return usageErr(errors.New("--replicas must be at least 1"))
			}
			switch {
			case cfg.Agents < 1:
				return usageErr(errors.New("--agents must be at least 1"))
			case cfg.Slow < 0, cfg.LeaseTTL <= 0, cfg.SweepInterval <= 0, cfg.Timeout <= 0, cfg.KillReplicaEvery < 0:
				return usageErr(errors.New("--slow and --kill-replica-every must not be negative; --lease-ttl, --sweep-interval and --timeout must be positive"))
			case cfg.MaxFiles < 0:
				return usageErr(errors.New("--max-files must not be negative (0: all files)"))
			}
			cfg.BoardToken = firstNonEmpty(cfg.BoardToken, a.getenv(EnvToken))
			cfg.StartServer = startEmbeddedServer
			rep, err := swarm.Run(cmd.Context(), cfg, a.stderr)
			if rep == nil {
				return err
			}
			if jsonOut {
				if werr := writeJSON(a.stdout, rep); werr != nil {
					return werr
				}
			} else {
				rep.WriteText(a.stdout)
			}
			if err != nil {
				return &exitError{Code: ExitError, Err: err}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Dir, "dir", ".", "directory tree to file one issue per regular file for (skips .git)")
	f.IntVar(&cfg.Agents, "agents", 8, "number of agents, one process each at a time")
	f.Float64Var(&cfg.KillRate, "kill-rate", 0.1, "probability that a checkout is answered by a SIGKILL of the agent process during its work")
	f.DurationVar(&cfg.Slow, "slow", 0, "stretch each issue's work to at least this long, so kills land mid-checkout")
	f.BoolVar(&cfg.Managed, "managed", false, "the server runs the agents: process adapters running 'clasp agent work --one-run', woken by the swarm; --kill-rate SIGKILLs their processes (found by the run's pid)")
	f.BoolVar(&cfg.MCP, "mcp", false, "each agent process is an MCP client of a 'clasp mcp' process and works through its tools (same kills: the pair dies together)")
	f.StringSliceVar(&cfg.ManagedCommand, "agent-command", nil, "with --managed: the agents' process runs this command line (absolute program path, then arguments, comma-separated) instead of 'clasp agent work --one-run'; e.g. /bin/sh,$PWD/examples/paperclip-agent/agent.sh,0.1")
	f.BoolVar(&cfg.Deps, "deps", false, "also one issue per directory, blocked by its entries' issues; checks the tree hash, the blocker order and one wake per ready directory")
	f.StringVar(&agentCmd, "agent-cmd", "", "run this command line as each agent's process instead of 'clasp agent work' (split at spaces, no shell), e.g. \"python3 examples/python-agent/agent.py\": it gets CLASP_URL and CLASP_TOKEN/CLASP_API_KEY and prints event=checked_out lines for the kills")
	f.BoolVar(&cfg.Git, "git", false, "a shared bare repository with the gate as its pre-receive hook: each agent process works in its own clone, a worktree per claim,\ncommits the result stamped, pushes the branch and merges it into main; --freeze-rate freezes agents past their lease")
	f.Float64Var(&cfg.FreezeRate, "freeze-rate", 0.1, "with --git: probability that a checkout freezes its agent process (SIGSTOP until its run is swept and its issue taken over, then SIGCONT);\nabove 0, the first checkout always freezes")
	f.BoolVar(&cfg.NoClaim, "no-claim", false, "agents find work with inbox, list and checkout instead of claim-next (to compare)")
	f.StringVar(&cfg.ServerURL, "server", "", "use the clasp server at this URL instead of an embedded one")
	f.StringVar(&cfg.BoardToken, "token", "", "board token of --server, or of a --database-url that has one already (default $"+EnvToken+"; none for --local-trusted)")
	f.StringVar(&cfg.DatabaseURL, "database-url", "", "run --replicas clasp serve processes on this PostgreSQL database instead of an embedded server")
	f.IntVar(&cfg.Replicas, "replicas", 3, "with --database-url: number of clasp serve processes")
	f.DurationVar(&cfg.KillReplicaEvery, "kill-replica-every", 0, "with --database-url: SIGKILL a random replica this often and restart it on its port (0: never)")
	f.StringVar(&cfg.DataDir, "data-dir", "", "directory for the embedded database and the agents' logs (default a fresh temporary directory)")
	f.BoolVar(&cfg.Keep, "keep", false, "keep the temporary data directory")
	f.DurationVar(&cfg.LeaseTTL, "lease-ttl", 3*time.Second, "lease TTL of the embedded server (with --server: the server's, to wait for its sweeper)")
	f.DurationVar(&cfg.SweepInterval, "sweep-interval", time.Second, "sweep interval of the embedded server (with --server: the server's)")
	f.DurationVar(&cfg.Timeout, "timeout", 10*time.Minute, "give up (exit 1) when setting up and working take longer")
	f.IntVar(&cfg.MaxFiles, "max-files", 0, "file issues for at most this many files (0: all)")
	f.BoolVar(&jsonOut, "json", false, "print the report as JSON")
	return cmd
}

// startEmbeddedServer starts the server of `clasp serve` (Serve) on a free
// loopback port with its database in opts.DataDir, for the swarm. The
// server runs until Stop, not until ctx ends, so that the swarm can still
// check the outcome after its work was interrupted.
func startEmbeddedServer(ctx context.Context, opts swarm.ServerOptions) (*swarm.EmbeddedServer, error) {
	info, stop, err := serveInBackground(ctx, ServeConfig{
		DataDir:       opts.DataDir,
		Listen:        "127.0.0.1:0",
		LeaseTTL:      opts.LeaseTTL,
		SweepInterval: opts.SweepInterval,
		Logger:        slog.New(slog.NewTextHandler(opts.Log, nil)),
	})
	if err != nil {
		return nil, err
	}
	return &swarm.EmbeddedServer{URL: info.URL, BoardToken: info.BoardToken, Stop: stop}, nil
}
