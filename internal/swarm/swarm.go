package swarm

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// Config configures Run. Zero fields take the defaults in their comments.
type Config struct {
	Dir      string  // tree to file issues for; default "."
	Agents   int     // agents, one process each at a time; default 8
	KillRate float64 // chance (0..1) that a checkout announced by a process is answered by a SIGKILL during the work
	Slow     time.Duration
	// NoClaim makes the agents find work with inbox, list and checkout
	// instead of claim-next (their --no-claim), for comparison.
	NoClaim bool
	// Managed makes the server run the agents: each agent gets a
	// process adapter running AgentCommand with --one-run (one issue per
	// server-managed run), the swarm wakes them until every issue is done,
	// and KillRate applies to the runs' processes (found by their pid),
	// which the server must recover (process_lost, one retry). The server
	// must run on this machine; not with DatabaseURL. Slow defaults to
	// 100 ms.
	Managed bool
	// Deps files one issue per directory as well, blocked by (and the
	// parent of) its entries' issues and assigned round-robin to the
	// agents; the work on a directory hashes its entries' results
	// (deps.go). The check adds: the root's result is the tree hash, no
	// issue entered in_progress or done before its blockers were done,
	// and every directory's ready state woke its agent exactly once. Not
	// with MCP or ManagedCommand (their agents hash files only).
	Deps bool
	// MCP makes each agent process an MCP client of a `clasp mcp` process
	// (`clasp agent work --mcp`): the same work and kills, through the
	// MCP tools. Not with Managed or DatabaseURL.
	MCP bool
	// ManagedCommand, with Managed, is the command line (program and
	// arguments) every agent's process adapter runs as it is, instead of
	// AgentCommand --one-run: any agent that works one issue per run with
	// the run's credentials (CLASP_* or PAPERCLIP_* variables) and writes
	// the swarm's result comment ("sha256 <hex>" of the file the
	// description names) with status done.
	ManagedCommand []string
	// Git gives the agents a shared bare repository (in the data
	// directory) with a first commit on main and the gate as its
	// pre-receive hook (a gate token of the swarm's company): each agent
	// process works in its own clone, each claim in its own worktree; it
	// commits the result stamped, pushes the issue's branch, sets the
	// issue done and merges the result into main (gitswarm.go). Besides
	// the kills, FreezeRate of the checkouts (and, when it is above 0, the
	// swarm's first checkout) freeze their process
	// (SIGSTOP) until the hold's run is swept and its issue taken over
	// (bounded), then continue it (SIGCONT), so that a holder presumed
	// dead pushes: the gate must refuse it. The check adds: main holds
	// exactly one result commit per issue, stamped with its completed
	// epoch, with the file's hash; every push of a swept frozen hold was
	// refused, and there were such refusals; no worktree served two runs.
	// Not with Managed, MCP, Deps or a custom AgentCommand. Slow defaults
	// to 200 ms, so that a freeze lands before the push.
	Git        bool
	FreezeRate float64

	// ServerURL targets an existing server (with BoardToken, "" if it runs
	// --local-trusted) instead of starting an embedded one.
	ServerURL  string
	BoardToken string

	// DataDir holds the embedded server's database and the logs; default a
	// fresh temporary directory, removed at the end unless Keep.
	DataDir string
	Keep    bool

	// LeaseTTL and SweepInterval configure the embedded server (defaults 3 s
	// and 1 s, so that runs of killed processes are swept quickly); with
	// ServerURL they tell how long to wait for its sweeper.
	LeaseTTL      time.Duration
	SweepInterval time.Duration

	Timeout  time.Duration // setup and work (the final checks get their own few minutes); default 10 min
	MaxFiles int           // > 0: only the first MaxFiles files (sorted by path)

	// DatabaseURL, when set, makes the swarm start Replicas processes of
	// `clasp serve` (ServerBinary) against this PostgreSQL database, each on
	// its own loopback port, instead of an embedded server; agents spread
	// over them (each gets the list, starting at a different replica, and
	// fails over on connection errors). KillReplicaEvery > 0 SIGKILLs a
	// random replica at that interval and restarts it on the same port
	// while the agents carry on.
	DatabaseURL      string
	Replicas         int // default 3
	KillReplicaEvery time.Duration
	// ServerBinary is the clasp executable the replicas run; default this
	// executable.
	ServerBinary string

	// AgentCommand is the agent process to start, to which CLASP_URL and
	// the key (CLASP_TOKEN and CLASP_API_KEY) are passed in the environment
	// (and --slow when Slow > 0); its event=checked_out lines time the kills;
	// default: this executable with "agent work".
	AgentCommand []string
	// StartServer starts the embedded server (required unless ServerURL).
	StartServer StartServerFunc
}

// ServerOptions are what Run asks of an embedded server.
type ServerOptions struct {
	DataDir       string        // directory for the SQLite database
	LeaseTTL      time.Duration // --lease-ttl
	SweepInterval time.Duration // --sweep-interval
	Log           io.Writer     // where the server logs
}

// EmbeddedServer is a running server started by a StartServerFunc.
type EmbeddedServer struct {
	URL        string // server root, e.g. http://127.0.0.1:41234
	BoardToken string // "" when the server trusts loopback callers
	// Stop shuts the server (and its sweeper) down.
	Stop func(ctx context.Context) error
}

// StartServerFunc starts an embedded clasp server on a loopback port
// (internal/cli passes one built on cli.Serve; this package cannot import
// internal/cli, which imports it).
type StartServerFunc func(ctx context.Context, opts ServerOptions) (*EmbeddedServer, error)

// Report is the outcome of Run.
type Report struct {
	Dir              string `json:"dir"`
	Server           string `json:"server"` // the server root; with replicas, their roots separated by commas
	Embedded         bool   `json:"embedded"`
	DataDir          string `json:"dataDir,omitempty"` // set when kept
	CompanyID        string `json:"companyId"`
	IssuePrefix      string `json:"issuePrefix"`
	Issues           int    `json:"issues"`
	Agents           int    `json:"agents"`
	Replicas         int    `json:"replicas,omitempty"` // `clasp serve` processes on the PostgreSQL database (--database-url)
	ReplicaKills     int    `json:"replicaKills"`       // replicas killed with SIGKILL (--kill-replica-every)
	ReplicaRestarts  int    `json:"replicaRestarts"`    // replicas started again on their port after a kill
	ProcessesStarted int    `json:"processesStarted"`
	Kills            int    `json:"kills"`
	Conflicts        int    `json:"conflicts"` // 409 checkout_conflict answers, summed from the agents' event lines
	// ConflictsByReason splits Conflicts by details.reason:
	// held_by_live_run (another run, or a killed process's run whose lease
	// has not expired yet), status_not_expected (taken and finished
	// between list and checkout), assigned_to_other_agent.
	ConflictsByReason map[string]int `json:"conflictsByReason"`
	// RunsDropped counts runs a live (not killed) agent process found
	// swept under it (event run_lost: it stalled past the lease TTL) and
	// LocksTakenOver the results it then could not write (event
	// lock_lost); both are recoveries, not violations.
	RunsDropped    int      `json:"runsDropped"`
	LocksTakenOver int      `json:"locksTakenOver"`
	AgentFailures  []string `json:"agentFailures,omitempty"`
	Managed        bool     `json:"managed,omitempty"`
	MCP            bool     `json:"mcp,omitempty"` // the agents worked through the tools of `clasp mcp` processes
	// Recoveries (managed swarm) is how many killed runs were seen retried,
	// and RecoveryP50Ms/RecoveryP99Ms the time from the SIGKILL to the
	// retry's process start (its startedAt), in milliseconds.
	Recoveries      int         `json:"recoveries,omitempty"`
	RecoveryP50Ms   float64     `json:"recoveryP50Ms,omitempty"`
	RecoveryP99Ms   float64     `json:"recoveryP99Ms,omitempty"`
	TimedOut        bool        `json:"timedOut"`
	Deps            *DepTally   `json:"deps,omitempty"` // the dependency swarm's counts (Config.Deps)
	Git             *GitTally   `json:"git,omitempty"`  // the git swarm's counts (Config.Git)
	Tally                       // what Check counted: done, adoptions, stale locks swept, runs lost, ...
	ElapsedSeconds  float64     `json:"elapsedSeconds"`
	IssuesPerSecond float64     `json:"issuesPerSecond"`
	Violations      []Violation `json:"violations"`
}

// maxListed caps the violations WriteText lists.
const maxListed = 50

// WriteText prints r for people (at most maxListed violations).
func (r *Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "swarm report (%s, company %s)\n", r.Server, r.IssuePrefix)
	fmt.Fprintf(w, "  issues              %d (%d done)\n", r.Issues, r.Tally.Done)
	fmt.Fprintf(w, "  agents              %d\n", r.Agents)
	if r.Replicas > 0 {
		fmt.Fprintf(w, "  server replicas     %d on one PostgreSQL database\n", r.Replicas)
		fmt.Fprintf(w, "  replica kills       %d (SIGKILL), %d restarts on the same port\n", r.ReplicaKills, r.ReplicaRestarts)
	}
	if r.Managed {
		fmt.Fprintf(w, "  agents              server-managed (process adapter, one issue per run)\n")
	}
	if r.MCP {
		fmt.Fprintf(w, "  agents              MCP clients of clasp mcp processes (one session run each)\n")
	}
	fmt.Fprintf(w, "  processes started   %d\n", r.ProcessesStarted)
	fmt.Fprintf(w, "  kills (SIGKILL)     %d\n", r.Kills)
	if r.Managed {
		fmt.Fprintf(w, "  retries after kills %d (SIGKILL to retry start p50 %.0f ms, p99 %.0f ms)\n", r.Recoveries, r.RecoveryP50Ms, r.RecoveryP99Ms)
	}
	fmt.Fprintf(w, "  checkout conflicts  %d%s\n", r.Conflicts, byReason(r.ConflictsByReason))
	fmt.Fprintf(w, "  checkouts           %d\n", r.Tally.CheckedOut)
	fmt.Fprintf(w, "  adoptions           %d\n", r.Tally.Adoptions)
	fmt.Fprintf(w, "  stale locks swept   %d\n", r.Tally.StaleLocksCleared)
	fmt.Fprintf(w, "  runs lost           %d\n", r.Tally.RunsLost)
	if r.RunsDropped+r.LocksTakenOver > 0 {
		fmt.Fprintf(w, "    under live agents %d runs swept after a stall, %d results refused (lock taken over)\n", r.RunsDropped, r.LocksTakenOver)
	}
	fmt.Fprintf(w, "  locks cleared       %d by release or done, %d by run end, %d swept, %d forced\n", r.Tally.Released, r.Tally.LocksReleased, r.Tally.StaleLocksCleared, r.Tally.ForceReleases)
	fmt.Fprintf(w, "  acknowledged writes %d checked against the database\n", r.Tally.AcksChecked)
	if d := r.Deps; d != nil {
		fmt.Fprintf(w, "  dependencies        %d directories, %d blocker edges, %d ready wakes\n", d.Dirs, d.Edges, d.Wakes)
		fmt.Fprintf(w, "  tree hash           %s\n", d.RootHash)
	}
	if g := r.Git; g != nil {
		fmt.Fprintf(w, "  git repository      %s\n", g.Repo)
		fmt.Fprintf(w, "  commits             %d in worktrees, %d on main\n", g.Commits, g.MainCommits)
		refused := 0
		for _, n := range g.PushesRefused {
			refused += n
		}
		fmt.Fprintf(w, "  branch pushes       %d accepted, %d refused%s\n", g.Pushes, refused, byReason(g.PushesRefused))
		fmt.Fprintf(w, "  refused stale pushes %d (superseded, dead or swept holder)\n", g.StalePushesRefused)
		fmt.Fprintf(w, "  merges into main    %d (%d non-fast-forward retries), %d landed by the swarm, %d failed\n", g.Merges, g.NonFastForwardRetries, g.Landed, g.MergeFailures)
		fmt.Fprintf(w, "  freezes (SIGSTOP)   %d: %d swept before SIGCONT, %d taken over, %d pushes after waking refused\n", g.Freezes, g.FrozenSwept, g.FrozenTakenOver, g.FrozenPushesRefused)
	}
	fmt.Fprintf(w, "  elapsed             %.1f s\n", r.ElapsedSeconds)
	fmt.Fprintf(w, "  issues per second   %.1f\n", r.IssuesPerSecond)
	if len(r.Tally.FilesChanged) > 0 {
		fmt.Fprintf(w, "  files changed on disk during the run (result matches the new content): %d\n", len(r.Tally.FilesChanged))
		for _, f := range r.Tally.FilesChanged {
			fmt.Fprintf(w, "    %s\n", f)
		}
	}
	for _, f := range r.AgentFailures {
		fmt.Fprintf(w, "  agent failure: %s\n", f)
	}
	if r.TimedOut {
		fmt.Fprintf(w, "  TIMED OUT\n")
	}
	if r.DataDir != "" {
		fmt.Fprintf(w, "  data kept in        %s\n", r.DataDir)
	}
	if len(r.Violations) == 0 {
		fmt.Fprintf(w, "  violations          none\n")
		return
	}
	fmt.Fprintf(w, "  violations          %d\n", len(r.Violations))
	for i, v := range r.Violations {
		if i == maxListed {
			fmt.Fprintf(w, "    ... and %d more (--json lists them all)\n", len(r.Violations)-maxListed)
			break
		}
		fmt.Fprintf(w, "    %s\n", v)
	}
}

// byReason formats conflict counts as " (reason n, ...)", sorted by reason.
func byReason(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// ErrViolations is returned (wrapped) by Run when Check found violations.
var ErrViolations = errors.New("swarm found violations")

// ErrTimeout is returned (wrapped) by Run when the work did not end within
// Config.Timeout.
var ErrTimeout = errors.New("swarm timed out")

// Run runs a swarm (see the package doc) and returns its report. progress
// gets a line about once a second, and the setup steps. The error is nil
// only when every check passed; it wraps ErrViolations or ErrTimeout when
// the report says why, and the report is then returned too. When ctx ends
// before the report (during the checks too) it returns ctx's error and no
// report.
//
// Its steps: setup (data directory, files, servers, company, agents and
// issues), work (the agent processes until the work ends or
// Config.Timeout), check (the sweeper's recovery, then Check against the
// acknowledged writes) and report.
func Run(ctx context.Context, cfg Config, progress io.Writer) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	r := &swarmRun{cfg: cfg, progress: progress, start: time.Now()}
	defer r.close()
	if err := r.setup(ctx); err != nil {
		r.interrupted(ctx)
		return nil, err
	}
	if err := r.work(ctx); err != nil {
		r.interrupted(ctx)
		return nil, err
	}
	r.check(ctx)
	if err := ctx.Err(); err != nil {
		// Stopped while checking: the stop signal (a terminal's Ctrl-C,
		// or a kill of the process group) may have reached the git and
		// other processes the checks ran, so what they found is no
		// verdict. The run ends as interrupted.
		r.logf("interrupted while checking the outcome: no verdict")
		r.interrupted(ctx)
		return nil, err
	}
	return r.report()
}

// swarmRun is one Run: what its steps hand on to the next ones.
type swarmRun struct {
	cfg      Config
	progress io.Writer
	start    time.Time
	cleanups []func() // run by close, last first

	dataDir, logDir string
	files           []File
	rep             *Report
	urlsFor         func(n int) []string // the server(s) agent n calls, preferred first
	replicas        *replicaSet          // nil without Config.DatabaseURL
	board           *client.Client

	co       *clasp.Company
	keys     []string
	agentIDs []string          // the agents, in the order of keys
	deps     *depIssues        // the dependency swarm's issues (Config.Deps), nil otherwise
	git      *gitState         // the git swarm's repository (Config.Git), nil otherwise
	expected map[string]string // issue id -> the file's SHA-256

	sup         *supervisor
	workElapsed time.Duration
	tally       Tally
	violations  []Violation
}

func (r *swarmRun) logf(format string, args ...any) {
	fmt.Fprintf(r.progress, "swarm: "+format+"\n", args...)
}

// interrupted prints, when ctx has ended (SIGINT or SIGTERM), one progress
// line saying the run was interrupted, how many agent processes it
// stopped, and whether its data directory is kept or removed.
func (r *swarmRun) interrupted(ctx context.Context) {
	if ctx.Err() == nil {
		return
	}
	stopped := 0
	if r.sup != nil {
		r.sup.mu.Lock()
		stopped = r.sup.stopped
		r.sup.mu.Unlock()
	}
	dir := "no run directory was made"
	switch {
	case r.dataDir == "":
	case r.cfg.Keep || r.cfg.DataDir != "":
		dir = "the run directory " + r.dataDir + " is kept"
	default:
		dir = "the run directory " + r.dataDir + " is removed (--keep keeps it)"
	}
	r.logf("interrupted: stopped %d agent process(es); %s", stopped, dir)
}

// onClose adds f to what close runs.
func (r *swarmRun) onClose(f func()) { r.cleanups = append(r.cleanups, f) }

// close runs the cleanups (stop the servers, remove a temporary data
// directory, ...) in the reverse order of their adding.
func (r *swarmRun) close() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// setup creates the data and log directories, lists the files, starts
// the servers (replicas on Config.DatabaseURL, or the embedded server
// unless Config.ServerURL) and files the company, agents and issues.
func (r *swarmRun) setup(ctx context.Context) error {
	cfg := &r.cfg
	r.dataDir = cfg.DataDir
	if r.dataDir == "" {
		d, err := os.MkdirTemp("", "clasp-swarm-")
		if err != nil {
			return fmt.Errorf("create data directory: %w", err)
		}
		r.dataDir = d
		if !cfg.Keep {
			r.onClose(func() { _ = os.RemoveAll(d) }) // best effort: a temporary directory
		}
	} else if err := os.MkdirAll(r.dataDir, 0o750); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	r.logDir = filepath.Join(r.dataDir, "logs")
	if err := os.MkdirAll(r.logDir, 0o750); err != nil {
		return fmt.Errorf("create log directory: %w", err)
	}

	files, err := ListFiles(ctx, cfg.Dir, []string{r.dataDir}, cfg.MaxFiles)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no regular files under %s", cfg.Dir)
	}
	r.files = files
	r.logf("%d files under %s", len(files), cfg.Dir)

	r.rep = &Report{Dir: cfg.Dir, Agents: cfg.Agents, MCP: cfg.MCP}
	if abs, err := filepath.Abs(cfg.Dir); err == nil {
		r.rep.Dir = abs
	}
	if cfg.Keep || cfg.DataDir != "" {
		r.rep.DataDir = r.dataDir
	}
	url, token, err := r.startServers(ctx)
	if err != nil {
		return err
	}
	r.rep.Server = strings.Join(r.urlsFor(0), ",")
	hc, err := newFailoverClient(r.urlsFor(0), time.Minute)
	if err != nil {
		return err
	}
	r.onClose(hc.CloseIdleConnections)
	r.board = client.New(url, client.WithToken(token), client.WithHTTPClient(hc), client.WithUserAgent("clasp-swarm"))

	r.co, r.keys, r.agentIDs, r.expected, err = setUp(ctx, r.board, cfg.Agents, files, !cfg.Deps)
	if err != nil {
		return err
	}
	if cfg.Deps {
		dirs := ListDirs(r.rep.Dir, files)
		if r.deps, err = fileDeps(ctx, r.board, r.co, files, dirs, r.agentIDs); err != nil {
			return err
		}
		r.expected = r.deps.expected
		r.rep.Deps = &DepTally{Dirs: len(dirs), Edges: r.deps.edges, RootHash: dirs[len(dirs)-1].Hash}
		r.logf("%d directories, %d blocker edges; tree hash %s", len(dirs), r.deps.edges, r.rep.Deps.RootHash)
	}
	if cfg.Git {
		if err := r.setupGit(ctx); err != nil {
			return err
		}
	}
	r.rep.CompanyID, r.rep.IssuePrefix, r.rep.Issues = r.co.ID, r.co.IssuePrefix, len(r.expected)
	r.logf("company %s: %d agents, %d issues filed in %.1fs", r.co.IssuePrefix, cfg.Agents, len(r.expected), time.Since(r.start).Seconds())
	return nil
}

// startServers starts the replicas (Config.DatabaseURL) or the embedded
// server (no Config.ServerURL), or takes Config.ServerURL, and sets
// r.urlsFor. It returns the board's server URL and token.
func (r *swarmRun) startServers(ctx context.Context) (url, token string, err error) {
	cfg := &r.cfg
	url, token = cfg.ServerURL, cfg.BoardToken
	r.urlsFor = func(n int) []string { return []string{url} }
	if cfg.DatabaseURL != "" {
		rs, err := startReplicas(ctx, cfg, r.dataDir, r.logDir)
		if err != nil {
			return "", "", err
		}
		r.replicas = rs
		r.onClose(func() { rs.stop(ctx) })
		r.urlsFor = rs.urls
		r.rep.Replicas = len(rs.servers)
		r.logf("%d replicas of clasp serve on PostgreSQL at %s (lease TTL %s, sweep every %s), logs in %s", len(rs.servers), strings.Join(rs.urls(0), ", "), cfg.LeaseTTL, cfg.SweepInterval, r.logDir)
		return rs.servers[0].URL(), rs.token, nil
	}
	if url != "" {
		return url, token, nil
	}
	logFile, err := os.Create(filepath.Join(r.logDir, "server.log")) // #nosec G304 -- a log file under the swarm's own data directory
	if err != nil {
		return "", "", fmt.Errorf("create server log: %w", err)
	}
	r.onClose(func() { _ = logFile.Close() }) // the server has stopped writing to it by then
	srv, err := cfg.StartServer(ctx, ServerOptions{DataDir: r.dataDir, LeaseTTL: cfg.LeaseTTL, SweepInterval: cfg.SweepInterval, Log: logFile})
	if err != nil {
		return "", "", fmt.Errorf("start embedded server: %w", err)
	}
	r.onClose(func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := srv.Stop(sctx); err != nil {
			r.logf("stop embedded server: %v", err)
		}
	})
	url = srv.URL
	r.rep.Embedded = true
	r.logf("embedded server at %s (lease TTL %s, sweep every %s), data in %s", url, cfg.LeaseTTL, cfg.SweepInterval, r.dataDir)
	return url, srv.BoardToken, nil
}

// work runs the agent processes (or, with Config.Managed, wakes the
// server's) and the replica kills until the work ends or Config.Timeout
// passes (the report then says TimedOut). It returns ctx's error if ctx
// ended.
func (r *swarmRun) work(ctx context.Context) error {
	cfg := &r.cfg
	wctx, cancel := context.WithTimeout(ctx, cfg.Timeout-time.Since(r.start))
	r.onClose(cancel)
	board, co := r.board, r.co
	sup := &supervisor{cfg: cfg, urls: r.urlsFor, total: len(r.expected), byReason: map[string]int{}, logDir: r.logDir,
		countDone: func(ctx context.Context) (int, error) { return issuesDone(ctx, board, co.ID) },
		board:     board, logf: r.logf, git: r.git, gitTally: GitTally{PushesRefused: map[string]int{}}}
	r.sup = sup
	replicas := r.replicas
	var kwg sync.WaitGroup
	kctx, stopKills := context.WithCancel(wctx)
	if replicas != nil {
		sup.replicaKills = func() int {
			replicas.mu.Lock()
			defer replicas.mu.Unlock()
			return replicas.kills
		}
	}
	if replicas != nil && cfg.KillReplicaEvery > 0 {
		kwg.Go(func() { replicas.killLoop(kctx, cfg.KillReplicaEvery, r.logf) })
	}
	if cfg.Managed {
		r.rep.Managed = true
		sup.runManaged(wctx, board, co.ID, r.progress)
	} else {
		sup.run(wctx, r.keys, r.progress)
		// Agents exit when they see no work they may take; an issue whose
		// lock a killed process's run still held at that moment (its lease
		// not yet expired, e.g. its replica was killed mid-request) is free
		// only later, and only for its assignee. Start the agents again
		// until nothing is left, so the run ends by the work, not by luck.
		for round := 1; round <= maxRestartRounds && wctx.Err() == nil; round++ {
			left, err := issuesLeft(wctx, board, co.ID)
			if err != nil || left == 0 {
				break
			}
			r.logf("%d issue(s) not done after the agents exited (held by a killed run); restarting the agents after its lease (round %d)", left, round)
			if !sleepCtx(wctx, cfg.LeaseTTL+2*cfg.SweepInterval) {
				break
			}
			if replicas != nil {
				replicas.ensureRunning(wctx, r.logf)
			}
			sup.run(wctx, r.keys, r.progress)
		}
	}
	stopKills()
	kwg.Wait()
	r.rep.TimedOut = wctx.Err() != nil && ctx.Err() == nil
	if ctx.Err() != nil {
		return ctx.Err()
	}
	r.workElapsed = time.Since(sup.start)
	return nil
}

// check lets the sweeper fail the runs of killed processes (the board must
// not finish them: the point is to see them recovered), then checks the
// outcome against the writes the agents saw acknowledged (CheckWithAcks).
func (r *swarmRun) check(ctx context.Context) {
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	r.onClose(ccancel)
	if r.replicas != nil {
		r.replicas.ensureRunning(cctx, r.logf)
	}
	waitForSweep(cctx, r.board, r.co.ID, r.cfg, r.logf)

	r.sup.mu.Lock()
	acks := append([]Ack(nil), r.sup.acks...)
	r.sup.mu.Unlock()
	r.tally, r.violations = CheckWithAcks(cctx, r.board, r.co.ID, r.expected, acks)
	if r.deps != nil {
		r.checkDeps(cctx)
	}
	if r.git != nil {
		r.checkGit(cctx)
	}
}

// checkDeps runs the dependency checks (checkDeps) once every directory
// issue's wake is recorded, or after depWakeWait: the wakes are sent by
// the sweeper's dependency pass, just after the writes that made the
// directories ready.
func (r *swarmRun) checkDeps(ctx context.Context) {
	add := func(issue, check, format string, args ...any) {
		r.violations = append(r.violations, Violation{Issue: issue, Check: check, Detail: fmt.Sprintf(format, args...)})
	}
	deadline := time.Now().Add(depWakeWait)
	for {
		issues, acts, err := readAll(ctx, r.board, r.co.ID)
		if err != nil {
			add("", CheckRead, "%v", err)
			return
		}
		var vs []Violation
		n := checkDeps(acts, issues, r.deps.dirs, func(issue, check, format string, args ...any) {
			vs = append(vs, Violation{Issue: issue, Check: check, Detail: fmt.Sprintf(format, args...)})
		})
		if len(vs) == 0 || time.Now().After(deadline) || !sleepCtx(ctx, 200*time.Millisecond) {
			r.violations = append(r.violations, vs...)
			r.rep.Deps.Wakes = n
			return
		}
	}
}

// depWakeWait bounds how long the dependency check waits for the wakes.
const depWakeWait = 15 * time.Second

// readAll reads every issue (with its blockers) and every activity row of
// a company.
func readAll(ctx context.Context, board *client.Client, companyID string) ([]*clasp.Issue, []*clasp.Activity, error) {
	page, err := board.IssueList(ctx, companyID, client.IssueListParams{Limit: 1000})
	if err != nil {
		return nil, nil, fmt.Errorf("list issues: %w", err)
	}
	issues, err := page.All(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("list issues: %w", err)
	}
	apage, err := board.CompanyActivity(ctx, companyID, client.ActivityListParams{Limit: 1000})
	if err != nil {
		return nil, nil, fmt.Errorf("list activity: %w", err)
	}
	acts, err := apage.All(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("list activity: %w", err)
	}
	return issues, acts, nil
}

// report fills the report from the supervisor's and the replicas' counts
// and the check, and returns it with ErrTimeout or ErrViolations when the
// run timed out or found violations.
func (r *swarmRun) report() (*Report, error) {
	rep, sup, vs := r.rep, r.sup, r.violations
	if replicas := r.replicas; replicas != nil {
		replicas.mu.Lock()
		rep.ReplicaKills, rep.ReplicaRestarts = replicas.kills, replicas.restarts
		rep.AgentFailures = append(rep.AgentFailures, replicas.failures...)
		replicas.mu.Unlock()
	}
	sup.mu.Lock()
	rep.ProcessesStarted, rep.Kills, rep.Conflicts = sup.started, sup.kills, sup.conflicts
	rep.ConflictsByReason = sup.byReason
	rep.AgentFailures = append(sup.failures, rep.AgentFailures...)
	rep.RunsDropped, rep.LocksTakenOver = sup.runsDropped, sup.locksTakenOver
	rep.Recoveries = len(sup.recovery)
	rep.RecoveryP50Ms = float64(percentile(sup.recovery, 50).Microseconds()) / 1000
	rep.RecoveryP99Ms = float64(percentile(sup.recovery, 99).Microseconds()) / 1000
	sup.mu.Unlock()
	rep.Tally = r.tally
	rep.Violations = vs
	if rep.Violations == nil {
		rep.Violations = []Violation{}
	}
	rep.ElapsedSeconds = time.Since(r.start).Seconds()
	if s := r.workElapsed.Seconds(); s > 0 {
		rep.IssuesPerSecond = float64(r.tally.Done) / s
	}
	switch {
	case rep.TimedOut:
		return rep, fmt.Errorf("%w after %s", ErrTimeout, r.cfg.Timeout)
	case len(vs) > 0:
		return rep, fmt.Errorf("%w: %d", ErrViolations, len(vs))
	}
	return rep, nil
}

func (cfg *Config) defaults() error {
	if cfg.Dir == "" {
		cfg.Dir = "."
	}
	if cfg.Agents <= 0 {
		cfg.Agents = 8
	}
	if cfg.KillRate < 0 || cfg.KillRate > 1 {
		return fmt.Errorf("kill rate %v is not between 0 and 1", cfg.KillRate)
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 3 * time.Second
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Minute
	}
	if len(cfg.AgentCommand) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find own executable for the agent processes: %w", err)
		}
		cfg.AgentCommand = []string{exe, "agent", "work"}
	}
	if cfg.Managed {
		if cfg.Slow == 0 {
			cfg.Slow = managedSlow
		}
	}
	if cfg.FreezeRate < 0 || cfg.FreezeRate > 1 {
		return fmt.Errorf("freeze rate %v is not between 0 and 1", cfg.FreezeRate)
	}
	if cfg.FreezeRate > 0 && !cfg.Git {
		return errors.New("freezes are of the git swarm: a freeze rate needs Git")
	}
	if cfg.Git {
		if cfg.Managed || cfg.MCP || cfg.Deps {
			return errors.New("a git swarm runs `clasp agent work --git` processes: not with managed agents, MCP agents or dependencies")
		}
		if cfg.Slow == 0 {
			cfg.Slow = gitSlow
		}
		if cfg.ServerBinary == "" {
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("find own executable for clasp gate install: %w", err)
			}
			cfg.ServerBinary = exe
		}
	}
	if cfg.Deps && (cfg.MCP || len(cfg.ManagedCommand) > 0) {
		return errors.New("a dependency swarm's agents hash directories too: not with MCP agents or a managed command")
	}
	if cfg.MCP && (cfg.Managed || cfg.DatabaseURL != "" || cfg.NoClaim) {
		return errors.New("an MCP swarm runs its own agents on one server: not with managed agents, a database URL (replicas) or no-claim")
	}
	if cfg.DatabaseURL != "" {
		if cfg.ServerURL != "" {
			return errors.New("a database URL (replicas) and a server URL exclude each other")
		}
		if cfg.Replicas <= 0 {
			cfg.Replicas = 3
		}
		if cfg.ServerBinary == "" {
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("find own executable for the replicas: %w", err)
			}
			cfg.ServerBinary = exe
		}
	} else if cfg.KillReplicaEvery > 0 {
		return errors.New("killing replicas needs a database URL (replicas)")
	}
	if cfg.ServerURL == "" && cfg.DatabaseURL == "" && cfg.StartServer == nil {
		return errors.New("no server: set ServerURL, DatabaseURL or StartServer")
	}
	return nil
}

// setUp creates the swarm's company, its agents with one API key each
// (returned in keys, their ids in agentIDs) and, when fileThem, one todo
// issue per file (expected maps issue id to the file's SHA-256).
func setUp(ctx context.Context, board *client.Client, agents int, files []File, fileThem bool) (co *clasp.Company, keys, agentIDs []string, expected map[string]string, err error) {
	co, err = createCompany(ctx, board)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	for i := range agents {
		a, err := board.AgentCreate(ctx, co.ID, client.AgentCreateRequest{Name: fmt.Sprintf("swarm-agent-%02d", i+1), Role: "hasher"})
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("create agent: %w", err)
		}
		k, err := board.AgentKeyCreate(ctx, a.ID)
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("create key of agent %s: %w", a.Name, err)
		}
		keys, agentIDs = append(keys, k.Token), append(agentIDs, a.ID)
	}
	if !fileThem {
		return co, keys, agentIDs, nil, nil
	}
	expected, err = fileIssues(ctx, board, co, files)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return co, keys, agentIDs, expected, nil
}

// neverEscalate is the swarm company's escalateAfterFailures.
var neverEscalate = 0

// createCompany creates the swarm's company with a fresh random issue prefix.
func createCompany(ctx context.Context, board *client.Client) (*clasp.Company, error) {
	for attempt := 0; ; attempt++ {
		prefix := []byte("SW")
		for range 6 {
			prefix = append(prefix, byte('A'+rand.IntN(26))) // #nosec G115 G404 -- a letter A-Z (IntN(26)) of a name prefix, not a secret
		}
		co, err := board.CompanyCreate(ctx, client.CompanyCreateRequest{
			Name:        fmt.Sprintf("swarm %s %s", time.Now().UTC().Format(time.RFC3339), prefix),
			IssuePrefix: string(prefix),
			// The swarm kills agents on purpose and checks that every
			// issue is done anyway: an issue whose holders happened to be
			// killed three times in a row must not be escalated to a
			// person (RULES.md E1), so the swarm's company never
			// escalates.
			EscalateAfterFailures: &neverEscalate,
		})
		if clasp.ErrorCode(err) == clasp.CodeAlreadyExists && attempt < 5 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("create company: %w", err)
		}
		return co, nil
	}
}

// fileIssues files one todo issue per file, a few at a time, and returns
// the expected result per issue id. Each create carries an Idempotency-Key
// derived from the company and the path, so a retry after a lost answer
// files nothing twice.
func fileIssues(ctx context.Context, board *client.Client, co *clasp.Company, files []File) (map[string]string, error) {
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		expected = make(map[string]string, len(files))
		firstErr error
		next     = make(chan File)
	)
	for range 8 {
		wg.Go(func() {
			for f := range next {
				k := sha256.Sum256([]byte(co.ID + "\x00" + f.Rel))
				ictx := client.WithIdempotencyKey(ctx, hex.EncodeToString(k[:16]))
				iss, err := board.IssueCreate(ictx, co.ID, client.IssueCreateRequest{
					Title: f.Rel, Description: f.Abs, Status: clasp.IssueTodo,
				})
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = fmt.Errorf("file issue for %s: %w", f.Rel, err)
					}
				} else {
					expected[iss.ID] = f.SHA256
				}
				mu.Unlock()
			}
		})
	}
	for _, f := range files {
		next <- f
	}
	close(next)
	wg.Wait()
	return expected, firstErr
}

// waitForSweep waits until no run of the company is queued or running, for
// at most a lease TTL plus two sweep intervals plus slack (the lease TTL of
// a remote server is read off its runs).
// maxRestartRounds bounds how often Run starts the agents again for issues
// left behind by killed runs.
const maxRestartRounds = 5

// issuesLeft counts the company's issues that are not done (at most one
// page's worth: any is enough to go on).
func issuesLeft(ctx context.Context, board *client.Client, companyID string) (int, error) {
	p, err := board.IssueList(ctx, companyID, client.IssueListParams{
		Statuses: []clasp.IssueStatus{clasp.IssueBacklog, clasp.IssueTodo, clasp.IssueInProgress, clasp.IssueInReview, clasp.IssueBlocked},
		Limit:    100,
	})
	if err != nil {
		return 0, err
	}
	return len(p.Items), nil
}

// issuesDone counts the company's issues in status done, as the
// end-of-run check does (Tally.Done): the progress line's count.
func issuesDone(ctx context.Context, board *client.Client, companyID string) (int, error) {
	p, err := board.IssueList(ctx, companyID, client.IssueListParams{Statuses: []clasp.IssueStatus{clasp.IssueDone}, Limit: 1000})
	if err != nil {
		return 0, err
	}
	all, err := p.All(ctx)
	return len(all), err
}

func waitForSweep(ctx context.Context, board *client.Client, companyID string, cfg Config, logf func(string, ...any)) {
	ttl := cfg.LeaseTTL
	if cfg.ServerURL != "" {
		if p, err := board.RunList(ctx, companyID, client.RunListParams{Limit: 1}); err == nil && len(p.Items) > 0 {
			ttl = leaseTTL(p.Items[0])
		}
	}
	deadline := time.Now().Add(ttl + 2*cfg.SweepInterval + 2*time.Second)
	if cfg.Managed {
		// A managed run whose process was not killed is not the sweeper's
		// to end: its process ends by itself (one issue per run), at the
		// latest when the server stops it at the adapter's timeout. A
		// loaded machine can take longer than a lease to get there.
		deadline = time.Now().Add(managedRunTimeout + ttl + 2*cfg.SweepInterval + 2*time.Second)
	}
	waited := false
	for {
		p, err := board.RunList(ctx, companyID, client.RunListParams{Statuses: []clasp.RunStatus{clasp.RunQueued, clasp.RunRunning}, Limit: 1})
		if err == nil && len(p.Items) == 0 {
			return
		}
		if time.Now().After(deadline) {
			logf("runs still live after waiting for the sweeper; checking anyway")
			return
		}
		if !waited {
			logf("waiting for the sweeper to fail the runs of killed processes")
			waited = true
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return
		}
	}
}

// supervisor runs the agent processes and follows their event lines.
type supervisor struct {
	cfg  *Config
	urls func(n int) []string // the server(s) agent n calls, preferred first
	// replicaKills, when not nil, counts the replica kills (progress line).
	replicaKills func() int
	total        int
	logDir       string
	start        time.Time // when the first process started
	// countDone counts the issues done in the database (issuesDone), for
	// the progress line; doneSeen is its last answer, kept when a count
	// fails (a replica killed at that moment).
	countDone func(ctx context.Context) (int, error)
	doneSeen  atomic.Int64

	// board reads runs and issues for the freezes; git is the git swarm's
	// repository (nil otherwise) and gitTally its counts, guarded by mu;
	// slots counts the goroutines of run (slots, replacements of frozen
	// processes, their thaws).
	board    *client.Client
	logf     func(format string, args ...any) // a line of the swarm's progress output
	git      *gitState
	gitTally GitTally
	slots    sync.WaitGroup
	// frozeOnce is set by the first freeze.
	frozeOnce atomic.Bool

	mu        sync.Mutex
	started   int
	live      int
	kills     int
	conflicts int
	byReason  map[string]int
	// runsDropped and locksTakenOver count run_lost and lock_lost events;
	// stopped counts the processes killed because the swarm's context
	// ended (SIGINT or SIGTERM).
	runsDropped, locksTakenOver, stopped int
	failures                             []string
	acks                                 []Ack           // writes the agents saw acknowledged (their event lines)
	recovery                             []time.Duration // managed: SIGKILL to the retry's start, per recovered run
}

// run runs one slot per key (runSlot) and prints a progress line about
// once a second until every slot has ended.
func (s *supervisor) run(ctx context.Context, keys []string, progress io.Writer) {
	if s.start.IsZero() { // a later round (Run's restarts) keeps the first start
		s.start = time.Now()
	}
	for i, key := range keys {
		s.slots.Go(func() { s.runSlot(ctx, i+1, key) })
	}
	stop := make(chan struct{})
	var pwg sync.WaitGroup
	pwg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				fmt.Fprintln(progress, s.progressLine(ctx))
			}
		}
	})
	s.slots.Wait()
	close(stop)
	pwg.Wait()
	fmt.Fprintln(progress, s.progressLine(ctx))
}

// maxFailures is how many times in a row an agent process may exit with an
// error before its slot gives up.
const maxFailures = 3

// runSlot keeps agent number n working: it starts a process with key, and
// starts a replacement at once whenever the swarm killed it, until a
// process exits by itself (no work left), or fails maxFailures times in a
// row, or ctx ends (then it kills the process).
func (s *supervisor) runSlot(ctx context.Context, n int, key string) {
	logFile, err := os.OpenFile(filepath.Join(s.logDir, fmt.Sprintf("agent-%02d.log", n)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		s.fail(fmt.Sprintf("agent %d: open log: %v", n, err))
		return
	}
	defer logFile.Close()
	failures := 0
	for ctx.Err() == nil {
		killed, err := s.runProcess(ctx, n, key, logFile)
		switch {
		case killed:
			failures = 0 // killed by us: replace at once
		case err == nil:
			return // no work left
		case ctx.Err() != nil:
			return
		default:
			failures++
			s.fail(fmt.Sprintf("agent %d: process failed: %v (see %s)", n, err, logFile.Name()))
			if failures >= maxFailures {
				return
			}
			sleepCtx(ctx, time.Second)
		}
	}
}

// runProcess runs one agent process to its end. killed reports that it died
// of a SIGKILL sent by the swarm (the kill was counted).
func (s *supervisor) runProcess(ctx context.Context, n int, key string, logFile *os.File) (killed bool, err error) {
	args := append([]string(nil), s.cfg.AgentCommand...)
	if s.cfg.Slow > 0 {
		args = append(args, "--slow", s.cfg.Slow.String())
	}
	if s.cfg.NoClaim {
		args = append(args, "--no-claim")
	}
	if s.cfg.MCP {
		args = append(args, "--mcp")
	}
	if s.git != nil {
		args = append(args, s.gitArgs(n)...)
	}
	cmd := exec.Command(args[0], args[1:]...) // #nosec G204 -- the agent command the operator passed, run without a shell
	// CLASP_URL lists the replicas (one URL without them), starting at a
	// different one per agent: the agents spread over the replicas.
	// The key also goes in CLASP_API_KEY, which the Python and TypeScript
	// clients read first; a run named by the swarm's own environment is
	// not the agent's to adopt.
	cmd.Env = append(os.Environ(), "CLASP_URL="+strings.Join(s.urls(n-1), ","), "CLASP_TOKEN="+key, "CLASP_API_KEY="+key,
		"CLASP_RUN_ID=", "PAPERCLIP_RUN_ID=", "PAPERCLIP_API_KEY=")
	cmd.Stderr = logFile
	// The agent dies with the swarm even if the swarm itself is SIGKILLed.
	setDeathSignal(cmd)
	if s.cfg.MCP {
		// The agent and its `clasp mcp` die in the same instant, so the
		// server never sees a stdin EOF (which would finish the run).
		setOwnGroup(cmd)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return false, err
	}
	if err := cmd.Start(); err != nil {
		return false, fmt.Errorf("start %s: %w", args[0], err)
	}
	s.mu.Lock()
	s.started++
	s.live++
	s.mu.Unlock()
	kill := func() { _ = cmd.Process.Kill() } // SIGKILL; a no-op once the process is reaped
	if s.cfg.MCP {
		kill = func() { killGroup(cmd) }
	}
	stopOnCancel := context.AfterFunc(ctx, kill)
	var timers []*time.Timer
	var frozen *frozenHold // the hold this process was frozen in, if any

	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		ev, ok := ParseEvent(sc.Text())
		if !ok {
			continue
		}
		if a, ok := ackFromEvent(ev); ok {
			s.mu.Lock()
			s.acks = append(s.acks, a)
			s.mu.Unlock()
		}
		switch ev.Name {
		case EventCheckedOut:
			// The swarm's first checkout always freezes (every git swarm
			// with freezes sees a holder wake up after a takeover), the
			// others at the freeze rate.
			first := s.cfg.FreezeRate > 0 && s.frozeOnce.CompareAndSwap(false, true)
			if frozen == nil && (first || s.cfg.FreezeRate > 0 && rand.Float64() < s.cfg.FreezeRate) { // #nosec G404 -- fault injection (which agents to freeze), not a secret
				// At once: the work (Slow at least) has not reached its push.
				frozen = s.freeze(ctx, n, key, cmd, ev)
				if frozen != nil {
					break
				}
			}
			if s.cfg.KillRate > 0 && rand.Float64() < s.cfg.KillRate { // #nosec G404 -- fault injection (which agents to kill), not a secret
				// A random moment of the work: the work lasts about Slow.
				timers = append(timers, time.AfterFunc(rand.N(max(s.cfg.Slow, time.Millisecond)), kill)) // #nosec G404 -- fault injection delay, not a secret
			}
		case EventCommitted, EventPushed, EventPushRefused, EventMerged, EventNonFastForward, EventMergeFailed:
			if s.git != nil {
				s.gitEvent(ev, frozen)
			}
		case EventConflict:
			s.mu.Lock()
			s.conflicts++
			s.byReason[ev.Fields["reason"]]++
			s.mu.Unlock()
		case EventRunLost:
			s.mu.Lock()
			s.runsDropped++
			s.mu.Unlock()
		case EventLockLost:
			s.mu.Lock()
			s.locksTakenOver++
			s.mu.Unlock()
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
	err = cmd.Wait()
	// The stop on cancel already ran: the process was alive when the
	// swarm's context ended, and was stopped for it.
	stoppedForCancel := !stopOnCancel()
	for _, t := range timers {
		t.Stop()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live--
	if stoppedForCancel {
		s.stopped++
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		s.kills++
		return true, nil
	}
	return false, err
}

func (s *supervisor) fail(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, msg)
}

// progressLine is the once-a-second line: done/total, kills, live agent
// processes, conflicts, elapsed time. "done" is the number of issues done
// in the database, what the report's "done" counts (Tally.Done), read
// through the board (the last count when the read fails); not the done
// events the agents printed, since an agent killed right after its write
// loses its line.
func (s *supervisor) progressLine(ctx context.Context) string {
	if s.countDone != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if n, err := s.countDone(rctx); err == nil {
			s.doneSeen.Store(int64(n))
		}
		cancel()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	replicas := ""
	if s.replicaKills != nil {
		replicas = fmt.Sprintf("  replica kills %d", s.replicaKills())
	}
	return fmt.Sprintf("swarm: done %d/%d  kills %d%s  live %d  conflicts %d  elapsed %.1fs",
		s.doneSeen.Load(), s.total, s.kills, replicas, s.live, s.conflicts, time.Since(s.start).Seconds())
}
