package cli

import (
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/spf13/cobra"

	"github.com/clasp-dev/clasp/internal/bench"
)

// newBenchCmd is `clasp bench` (package bench, Run).
func (a *app) newBenchCmd() *cobra.Command {
	var (
		cfg        bench.Config
		workloads  string
		jsonOut    bool
		cpuProfile string
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure clasp over HTTP against the raw limit of its SQL, side by side",
		Long: `Start a clasp server on a fresh embedded SQLite database in this process (or use
--server with its board token), create a company, agents and --issues issues
through the API, and run each --workload at each --clients count for --duration,
over real HTTP on loopback:

  cycle      each client checks out one of its own issues, then releases it
             (one op = checkout + release)
  contended  N runs race for one issue, round after round; every round must
             have exactly one winner (one op = one round)
  mixed      80% reads (issue get, issue list, inbox), 20% writes (checkout or
             release); one op = one request
  claim      N agents of a company of the phase's own drain --issues issues
             (default 10,000 in a run with claim): claim-next (POST
             /api/agents/me/claim, scope unassigned), then PATCH status done,
             until 204 (one op = claim + PATCH); no claim may be refused and
             every issue must be claimed exactly once; in a run with cycle
             the drain takes turns (--slice) with the cycle phase of the same
             --clients, paused between its turns, and the report gives claim
             ops/s over cycle ops/s, each over its own turns

In each cycle phase the same SQL statements (the lock rule's UPDATE and its
activity INSERT, one COMMIT per step) also run straight through database/sql on
a separate SQLite file with the same PRAGMAs, with synchronous=FULL (one fsync
per commit) and NORMAL, by the same number of goroutines: the raw limit. The
server and the two raw limits take turns (--slice, 1 s), --duration each, so
that a machine whose load changes weighs on all three alike; the report gives
the ratio of HTTP to raw.

With --database-url postgres://... the in-process server keeps its state in a
fresh schema of that PostgreSQL database instead (dropped at the end; --sync
does not apply), and the raw limit of the cycle phases is the store's own
checkout and release statements (each one statement with its activity rows)
run straight through pgx on a second fresh schema, interleaved the same way.

It reports ops/s, p50/p95/p99 latency, CPU seconds per 1,000 ops (process CPU
time from getrusage: in-process server and HTTP clients together; raw rows the
raw goroutines alone) and the peak RSS of each phase, as a table or --json,
with a progress line on stderr while it runs. It exits 1 if a check failed
(an unexpected answer, a contended round without exactly one winner, a
refused claim, an issue claimed twice or never).

Set-up requests refused by a rate limit (429) are sent again after the
answer's Retry-After. With --server, at the end the bench's companies
("clasp bench", "clasp bench claim") have their agents terminated and their
open issues cancelled, and are archived: left out of the company list and
the board's picker, kept in the database (the API deletes no company), and
stderr says so (--keep-data leaves them as they are).`,
		Example: `  clasp bench                                        # cycle at 1, 8 and 32 clients, 10 s each
  clasp bench --workload cycle,contended,mixed --clients 32 --duration 20s
  clasp bench --workload cycle,claim --clients 64 --issues 10000   # claim vs cycle
  clasp bench --database-url postgres://clasp@127.0.0.1/clasp --clients 32
  clasp bench --sync normal --json > bench.json
  clasp bench --server http://127.0.0.1:3100 --token-file .clasp/board-token --workload mixed`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			for w := range strings.SplitSeq(workloads, ",") {
				if w = strings.TrimSpace(w); w != "" {
					cfg.Workloads = append(cfg.Workloads, w)
				}
			}
			if !cmd.Flags().Changed("issues") {
				cfg.Issues = 0 // the default of the workloads (bench.Config)
			}
			if cfg.ServerURL != "" {
				cfg.Token = firstNonEmpty(cfg.Token, a.getenv(EnvToken))
			}
			if err := cfg.Validate(); err != nil {
				return usageErr(err)
			}
			cfg.Command = "clasp " + strings.Join(redactedArgs(os.Args[1:]), " ")
			cfg.Progress = a.stderr
			if f, ok := a.stderr.(*os.File); ok {
				if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
					cfg.ProgressTTY = true
				}
			}
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile) // #nosec G304 -- the --cpuprofile path the operator passed
				if err != nil {
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				defer pprof.StopCPUProfile()
			}
			rep, err := bench.Run(cmd.Context(), cfg)
			if rep == nil {
				return err
			}
			if jsonOut {
				if werr := rep.WriteJSON(a.stdout); werr != nil {
					return werr
				}
			} else if werr := rep.WriteTable(a.stdout); werr != nil {
				return werr
			}
			if err != nil {
				if errors.Is(err, bench.ErrFailed) {
					return &exitError{Code: ExitError} // the report says what failed
				}
				return &exitError{Code: ExitError, Err: err}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&workloads, "workload", bench.WorkloadCycle, "comma-separated workloads: cycle, contended, mixed, claim")
	f.IntSliceVar(&cfg.Clients, "clients", bench.DefaultClients, "comma-separated counts of concurrent clients, one phase each")
	f.DurationVar(&cfg.Duration, "duration", bench.DefaultDuration, "length of each phase (of each target: a cycle phase runs the server and the two raw limits for this long each)")
	f.DurationVar(&cfg.Slice, "slice", bench.DefaultSlice, "a cycle phase interleaves the server, the raw limits and any claim drain in turns this long")
	f.IntVar(&cfg.Issues, "issues", bench.DefaultIssues, "issues to create (one is the contended workload's; the others are spread over the agents); a claim phase drains this many of its own (default 10000 when --workload has claim)")
	f.StringVar(&cfg.Sync, "sync", bench.DefaultSync, "synchronous mode of the in-process server's SQLite: full (an acknowledged write survives power loss) or normal (it may be lost on power loss, not on a process crash)")
	f.StringVar(&cfg.ServerURL, "server", "", "bench the clasp server at this URL instead of an in-process one (no raw phases)")
	f.StringVar(&cfg.Token, "token", "", "board token of --server (default $"+EnvToken+"; none for a --local-trusted server)")
	f.StringVar(&cfg.DatabaseURL, "database-url", "", "run the in-process server on this PostgreSQL database (postgres://...) in a fresh schema, dropped at the end; the raw limit is the same statements through pgx in a second fresh schema")
	f.IntVar(&cfg.SeedIssues, "seed-issues", 0, "bulk-insert this many filler issues (done, unassigned) into each company before its phases, for scale figures (in-process servers only: SQLite or --database-url)")
	f.IntVar(&cfg.Blockers, "blockers", 0, "block every issue of the run by this many done issues, to weigh what dependencies cost (compare --blockers 2 with none)")
	f.IntVar(&cfg.SeedAgents, "seed-agents", 0, "bulk-insert this many filler agents (each with an API key and a finished run) into the same companies as --seed-issues, for scale figures (in-process servers only; like --seed-issues it adds the http-base baseline)")
	f.BoolVar(&cfg.NoRaw, "no-raw", false, "skip the raw and textbook limit phases")
	f.BoolVar(&cfg.KeepData, "keep-data", false, "with --server: leave the bench's companies, agents and issues as they are (by default at the end its agents are terminated, its open issues cancelled and its companies archived)")
	f.StringVar(&cfg.DataDir, "data-dir", "", "directory for the databases (default a fresh temporary directory, removed at the end)")
	f.BoolVar(&jsonOut, "json", false, "print the report as JSON")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run (server and clients) to this file")
	return cmd
}
