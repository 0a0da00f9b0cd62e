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

// newVerifyCmd is `clasp verify` (issue 6 item 1): concurrent clients run
// random lock operations against one server and the recorded history is
// checked for linearizability; exit 1 on a violation, with the history and
// its picture written under --out.
func (a *app) newVerifyCmd() *cobra.Command {
	var cfg verify.Config
	var jsonOut, keep bool
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check that issue locks stay linearizable under concurrent random operations",
		Long: `verify starts an embedded server (or uses --server), lets --clients concurrent
clients (runs of a few agents) check out, release, read, heartbeat and finish
at random against --issues issues for --duration, records every call and
return (timeouts and connection errors as unknown outcomes), and checks the
history per issue against a sequential model of the lock with porcupine.
On a violation it writes the history (JSON) and porcupine's HTML picture
into --out and exits 1.`,
		Example: `  clasp verify --duration 30s --clients 16 --issues 4
  clasp verify --server http://127.0.0.1:3100 --token $CLASP_TOKEN --duration 1m --out /tmp/verify`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
					fmt.Fprintf(a.stdout, "histories checked: %d\noperations: %d %v\nunknown outcomes: %d\nserver errors (5xx): %d\nviolations: %d\nundecided (checker timeout): %d\nL7 broken at end: %d\nduration: %s\n",
						rep.Histories, rep.Operations, rep.ByKind, rep.Unknown, rep.ServerErrors, rep.Violations, rep.Undecided, rep.L7Broken, rep.Duration.Round(time.Millisecond))
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
	f.Int64Var(&cfg.Seed, "seed", 1, "random seed of the operation mix")
	f.StringVar(&cfg.Out, "out", ".", "directory for the history and HTML picture of a violation")
	f.StringVar(&cfg.ServerURL, "server", "", "check the clasp server at this URL instead of an embedded one")
	f.StringVar(&cfg.BoardToken, "token", "", "board token of --server (default $"+EnvToken+")")
	f.DurationVar(&cfg.RequestTimeout, "request-timeout", 5*time.Second, "an answer later than this is an unknown outcome")
	f.BoolVar(&keep, "keep", false, "keep the embedded server's temporary data directory")
	f.BoolVar(&jsonOut, "json", false, "print the report as JSON")
	return cmd
}

// startVerifyServer starts the server of `clasp serve` on a free loopback
// port with its SQLite database in dataDir (the swarm's embedded server,
// startEmbeddedServer, with the default lease TTL: the model assumes runs
// are lost only when finished).
func startVerifyServer(ctx context.Context, dataDir string, log io.Writer) (*verify.Server, error) {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ready := make(chan ServeInfo, 1)
	served := make(chan error, 1)
	go func() {
		served <- Serve(sctx, ServeConfig{
			DataDir:       dataDir,
			Listen:        "127.0.0.1:0",
			LeaseTTL:      10 * time.Minute,
			SweepInterval: 10 * time.Second,
			Logger:        slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelWarn})),
		}, ready)
	}()
	select {
	case info := <-ready:
		stop := func(ctx context.Context) error {
			cancel()
			select {
			case err := <-served:
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return &verify.Server{URL: info.URL, BoardToken: info.BoardToken, Stop: stop}, nil
	case err := <-served:
		cancel()
		return nil, err
	case <-ctx.Done():
		cancel()
		<-served
		return nil, ctx.Err()
	}
}
