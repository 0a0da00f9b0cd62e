package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/clasp-dev/clasp/internal/verify"
	"github.com/spf13/cobra"
)

// EnvTestPGRestartCmd is the default of `clasp verify --db-restart-cmd`:
// a shell command that restarts the PostgreSQL server of
// CLASP_TEST_POSTGRES_URL (.ci/run may set it).
const EnvTestPGRestartCmd = "CLASP_TEST_PG_RESTART_CMD"

// newVerifyCmd is `clasp verify`: concurrent clients run
// random lock operations against one server and the recorded history is
// checked for linearizability; exit 1 on a violation, with the history and
// its picture written under --out.
func (a *app) newVerifyCmd() *cobra.Command {
	var cfg verify.Config
	var jsonOut, keep, process bool
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check that issue locks stay linearizable under concurrent random operations",
		Long: `verify starts an embedded server (or uses --server), lets --clients concurrent
clients (runs of a few agents) check out, release, read, heartbeat and finish
at random against --issues issues for --duration, records every call and
return (timeouts and connection errors as unknown outcomes), and checks the
history per issue against a sequential model of the lock with porcupine.
On a violation it writes the history (JSON) and porcupine's HTML picture
into --out and exits 1.

With --process (implied by --database-url and --replicas > 1) the server
runs as real child processes of this binary ("clasp serve"): one on a
temporary SQLite data directory, or --replicas on a throwaway database
created on the PostgreSQL server of --database-url (its user needs
CREATEDB; dropped at the end), clients spread over the replicas, with a
short lease TTL and sweep interval so that faults make runs lost. Faults
are then on by default (a period of 0 turns one off): --kill-every SIGKILLs
a replica and restarts it on the same port, --pause-every SIGSTOPs one
past the lease TTL and SIGCONTs it (its late writes must not win),
--terminate-every (PostgreSQL) ends the replicas' database connections
with pg_terminate_backend, --restart-db-every restarts PostgreSQL with
--db-restart-cmd (default $CLASP_TEST_PG_RESTART_CMD; none: no restarts),
--failover-every fails PostgreSQL over with --failover-cmd (SIGKILL of the
primary, promotion of its synchronous standby, a new standby seeded; see
scripts/pg-failover.sh, whose URL --database-url then takes), and a TCP proxy (toxiproxy) in front of each replica adds --latency and
drops connections every --drop-every, and --crash-client-every crashes a
client as a SIGKILLed agent dies (its call in flight cut, its run abandoned
to the lease; the clients are goroutines of this process, so the server
sees exactly what a dead agent process leaves: a closed connection and
silence). A pause ends with a SIGKILL and
restart of the replica 1 s after it resumed, and every replica is killed
and restarted at the end: calls a fault cut are unknown outcomes, bounded
by the kill that followed them (an answered 503 is bounded at its answer,
a reset during a drop where it was seen). A run may be lost without any
operation (its lease ran out) and the model allows for it. The report
counts faults per kind, and each issue's check time; an undecided history
(its check timed out) is kept under --out and fails the run with
--fail-undecided. At the end every issue is read once more and checked
against invariant L7 (RULES.md, Lock rules: an issue with a checkout lock is
in_progress and its execution lock names the same run); "L7 broken at
end" counts the issues that are not. Exit 1 on a violation, an L7 break or
a 5xx answer other than 503, or an acknowledged checkout missing from the
final state (its epoch above the issue's final epoch: "acknowledged
checkouts lost"); 2 on bad flags. With failovers the report gives the time
from each primary's kill to the first successful checkout after it (p50,
max). --check-timeout bounds the whole check; SIGTERM or SIGINT stops it at
once.

The long run (a few million operations across both):
  clasp verify --process --duration 5m --clients 16 --issues 12 --out /tmp/verify-sqlite
  clasp verify --database-url "$CLASP_TEST_POSTGRES_URL" --replicas 3 --duration 5m --clients 16 --issues 12 \
    --db-restart-cmd "pg_ctl -D $PGDATA -m immediate -w restart" --out /tmp/verify-pg

Failover (a primary and a synchronous standby on loopback):
  url=$(scripts/pg-failover.sh start /tmp/pgfo)
  clasp verify --database-url "$url" --replicas 3 --duration 5m --failover-cmd "scripts/pg-failover.sh failover /tmp/pgfo"
  scripts/pg-failover.sh stop /tmp/pgfo`,
		Example: `  clasp verify --duration 30s --clients 16 --issues 4
  clasp verify --process --duration 30s
  clasp verify --deps --duration 30s       # checkouts race reopened blockers too
  clasp verify --database-url postgres://clasp@127.0.0.1/clasp?sslmode=disable --replicas 3 --duration 30s
  clasp verify --server http://127.0.0.1:3100 --token-file .clasp/board-token --duration 1m --out /tmp/verify`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.Replicas > 1 && cfg.DatabaseURL == "" {
				return usageErr(fmt.Errorf("--replicas %d needs --database-url: replicas share one PostgreSQL database (SQLite serves one process)", cfg.Replicas))
			}
			if cfg.DatabaseURL != "" || cfg.Replicas > 1 {
				process = true
			}
			if !process {
				cfg.KillEvery, cfg.PauseEvery, cfg.TerminateEvery, cfg.RestartDBEvery, cfg.Latency, cfg.DropEvery, cfg.CrashEvery, cfg.FailoverEvery = 0, 0, 0, 0, 0, 0, 0, 0
			}
			if !cmd.Flags().Changed("db-restart-cmd") {
				cfg.DBRestartCmd = a.getenv(EnvTestPGRestartCmd)
			}
			if cfg.ServerURL == "" {
				dir, err := os.MkdirTemp("", "clasp-verify-")
				if err != nil {
					return err
				}
				if !keep {
					defer os.RemoveAll(dir)
				}
				cfg.DataDir = dir
				cfg.StartServer = startVerifyServer
				if process {
					bin, err := os.Executable()
					if err != nil {
						return err
					}
					cfg.Binary = bin
				}
			} else if cfg.BoardToken == "" {
				cfg.BoardToken = a.getenv(EnvToken)
			}
			cfg.Log = a.stderr
			rep, err := verify.Run(cmd.Context(), cfg)
			if rep != nil {
				if jsonOut {
					if werr := writeJSON(a.stdout, rep); werr != nil {
						return werr
					}
				} else {
					fmt.Fprintf(a.stdout, "histories checked: %d\noperations: %d %v\nfaults injected: %v (database connections terminated: %d)\nunknown outcomes: %d\n503 unavailable: %d\nserver errors (5xx but 503): %d\nviolations: %d\nundecided (checker timeout): %d\nL7 broken at end: %d\nacknowledged checkouts lost: %d\nduration: %s\ncheck time: %s\n",
						rep.Histories, rep.Operations, rep.ByKind, rep.Faults, rep.Terminated, rep.Unknown, rep.Unavailable, rep.ServerErrors, rep.Violations, rep.Undecided, rep.L7Broken, rep.LostWrites, rep.Duration.Round(time.Millisecond), rep.CheckTook.Round(time.Millisecond))
					if len(rep.Failovers) > 0 {
						fmt.Fprintf(a.stdout, "failovers: %s\n", verify.FailoverSummary(rep.Failovers))
					}
					for _, p := range rep.Partitions {
						if p.Result != "ok" {
							fmt.Fprintf(a.stdout, "issue %s: %s after %s (%d operations, %d open)\n", p.Issue, p.Result, p.Took.Round(time.Millisecond), p.Operations, p.Open)
						}
					}
					for _, e := range rep.FaultErrors {
						fmt.Fprintf(a.stdout, "fault not injected: %s\n", e)
					}
					for _, f := range rep.Files {
						fmt.Fprintf(a.stdout, "wrote %s\n", f)
					}
				}
			}
			if err != nil {
				return &exitError{Code: ExitError, Err: err}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long the clients run")
	f.IntVar(&cfg.Clients, "clients", 8, "concurrent clients")
	f.IntVar(&cfg.Agents, "agents", 0, "agents the clients share (0: half the clients, rounded up)")
	f.IntVar(&cfg.Issues, "issues", 3, "issues the clients contend for")
	f.BoolVar(&cfg.Deps, "deps", false, "block each contended issue by an issue of its own, which the clients reopen and resolve: checks the readiness rules too")
	f.Int64Var(&cfg.Seed, "seed", 1, "random seed of the operation mix")
	f.StringVar(&cfg.Out, "out", ".", "directory for the history and HTML picture of a violation")
	f.StringVar(&cfg.ServerURL, "server", "", "check the clasp server at this URL instead of an embedded one")
	f.StringVar(&cfg.BoardToken, "token", "", "board token of --server (default $"+EnvToken+")")
	f.DurationVar(&cfg.RequestTimeout, "request-timeout", 5*time.Second, "an answer later than this is an unknown outcome")
	f.DurationVar(&cfg.ServerDeadline, "server-deadline", 1500*time.Millisecond, "the child servers' --request-deadline (--process): on PostgreSQL an unknown outcome is then over 2 x this + 2 s after its call unless its replica was paused (0: the servers' default, and no such bound)")
	f.BoolVar(&process, "process", false, "run the server as child processes (clasp serve) and inject faults")
	f.StringVar(&cfg.DatabaseURL, "database-url", "", "PostgreSQL server URL: the replicas use a throwaway database created there (implies --process)")
	f.IntVar(&cfg.Replicas, "replicas", 1, "server processes (more than 1 needs --database-url); client i uses replica i mod N")
	f.DurationVar(&cfg.LeaseTTL, "lease-ttl", 2*time.Second, "lease TTL of the child servers (--process)")
	f.DurationVar(&cfg.SweepInterval, "sweep-interval", 500*time.Millisecond, "sweep interval of the child servers (--process)")
	f.DurationVar(&cfg.KillEvery, "kill-every", 5*time.Second, "SIGKILL a replica and restart it about this often (--process; 0: never)")
	f.DurationVar(&cfg.PauseEvery, "pause-every", 8*time.Second, "SIGSTOP a replica past the lease TTL about this often (--process; 0: never)")
	f.DurationVar(&cfg.TerminateEvery, "terminate-every", 4*time.Second, "pg_terminate_backend the replicas' connections about this often (PostgreSQL; 0: never)")
	f.DurationVar(&cfg.RestartDBEvery, "restart-db-every", 10*time.Second, "restart PostgreSQL with --db-restart-cmd about this often (0: never)")
	f.DurationVar(&cfg.FailoverEvery, "failover-every", 12*time.Second, "fail PostgreSQL over with --failover-cmd about this often, counted from the end of the previous failover (0: never)")
	f.StringVar(&cfg.FailoverCmd, "failover-cmd", "", "shell command that fails PostgreSQL over: SIGKILLs the primary, promotes its synchronous standby and returns once a new standby streams, e.g. 'scripts/pg-failover.sh failover DIR' (--database-url then names both hosts with target_session_attrs=read-write; empty: no failovers)")
	f.StringVar(&cfg.DBRestartCmd, "db-restart-cmd", "", "shell command that restarts the PostgreSQL server, e.g. 'pg_ctl -D DIR -m immediate -w restart' (default $"+EnvTestPGRestartCmd+"; empty: no restarts)")
	f.DurationVar(&cfg.Latency, "latency", 10*time.Millisecond, "added round-trip latency between clients and replicas through a TCP proxy per replica: each direction half of it +- half (--process; 0 and --drop-every 0: no proxy)")
	f.DurationVar(&cfg.DropEvery, "drop-every", 3*time.Second, "drop one proxy's client connections for 300 ms about this often (--process; 0: never)")
	f.DurationVar(&cfg.CrashEvery, "crash-client-every", 2*time.Second, "crash a client about this often as a SIGKILLed agent dies: its call in flight is cut and its run abandoned, left for the lease to expire (--process; 0: never)")
	f.DurationVar(&cfg.CheckTimeout, "check-timeout", 5*time.Minute, "give each issue's linearizability check at most this long (then the report counts that history undecided)")
	f.BoolVar(&cfg.FailUndecided, "fail-undecided", false, "exit 1 also when a history is undecided (its check timed out); the history is kept under --out either way")
	f.BoolVar(&keep, "keep", false, "keep the embedded server's temporary data directory")
	f.BoolVar(&jsonOut, "json", false, "print the report as JSON")
	return cmd
}

// startVerifyServer starts the server of `clasp serve` on a free loopback
// port with its SQLite database in dataDir (the swarm's embedded server,
// startEmbeddedServer, with the default lease TTL: the model assumes runs
// are lost only when finished).
func startVerifyServer(ctx context.Context, dataDir string, log io.Writer) (*verify.Server, error) {
	info, stop, err := serveInBackground(ctx, ServeConfig{
		DataDir:       dataDir,
		Listen:        "127.0.0.1:0",
		LeaseTTL:      10 * time.Minute,
		SweepInterval: 10 * time.Second,
		Logger:        slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return nil, err
	}
	return &verify.Server{URL: info.URL, BoardToken: info.BoardToken, Stop: stop}, nil
}
