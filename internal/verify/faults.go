package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/clasp-dev/clasp/internal/serveproc"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Fault kinds, the keys of Report.Faults.
const (
	FaultKill      = "kill"      // a replica SIGKILLed and restarted on the same port
	FaultPause     = "pause"     // a replica SIGSTOPped past the lease TTL, then SIGCONTed
	FaultTerminate = "terminate" // pg_terminate_backend of the replicas' connections (one pass)
	FaultDBRestart = "dbRestart" // PostgreSQL restarted by Config.DBRestartCmd
	FaultDrop      = "drop"      // a replica's proxy dropped its client connections (disabled, or reset_peer) for a moment
	FaultFailover  = "failover"  // the PostgreSQL primary SIGKILLed and its standby promoted by Config.FailoverCmd
)

// dropFor is how long a connection drop lasts: the proxy is disabled (its
// connections closed, new ones refused) or resets every connection on
// the server's next answer, for this long.
const dropFor = 300 * time.Millisecond

// cluster is the process mode's replicas: `clasp serve` child processes
// on one SQLite data directory (one replica) or one throwaway PostgreSQL
// database (any number), and the fault injectors that hit them.
type cluster struct {
	servers []*serveproc.Server
	proxies []*toxiproxy.Proxy // one per replica in front of it (nil without --latency and --drop-every)
	locks   []sync.Mutex       // one per replica: a kill and a pause never overlap
	dbMu    sync.Mutex         // a database restart and a termination pass never overlap
	logs    []*os.File
	token   string
	dbURL   string // the throwaway database ("" on SQLite)
	drop    func(context.Context) error

	mu          sync.Mutex
	faults      map[string]int
	terminated  int                       // backends pg_terminate_backend ended
	killed      map[string][]kill         // per replica URL, when each SIGKILL had reaped the process and its sessions had ended
	pauses      map[string][][2]time.Time // per replica URL, when each SIGSTOP and its SIGCONT were sent
	appNames    []string                  // per replica, its database sessions' application_name (PostgreSQL)
	drops       map[string][][2]time.Time // per replica URL, when each drop (reset_peer) started and ended
	failovers   [][2]time.Time            // when each failover command started (the primary's kill) and ended
	faultErrors []string
}

// startCluster starts cfg.Replicas servers (see Config.Binary). On
// PostgreSQL it first creates a throwaway database on the server of
// cfg.DatabaseURL (its user needs CREATEDB), dropped by stop.
func startCluster(ctx context.Context, cfg *Config) (*cluster, error) {
	c := &cluster{faults: map[string]int{}, killed: map[string][]kill{}, drops: map[string][][2]time.Time{}, pauses: map[string][][2]time.Time{}}
	args := []string{"--lease-ttl", cfg.LeaseTTL.String(), "--sweep-interval", cfg.SweepInterval.String(), "--log-level", "warn"}
	if cfg.ServerDeadline > 0 {
		args = append(args, "--request-deadline", cfg.ServerDeadline.String())
	}
	var env []string
	if cfg.DatabaseURL != "" {
		u, drop, err := serveproc.CreateDatabase(ctx, cfg.DatabaseURL, "clasp_verify")
		if err != nil {
			return nil, err
		}
		c.dbURL, c.drop = u, drop
		if err := waitDatabase(ctx, u); err != nil {
			c.stop(ctx)
			return nil, err
		}
		args = append(args, "--data-dir", filepath.Join(cfg.DataDir, "replicas"))
	} else {
		if cfg.Replicas > 1 {
			return nil, fmt.Errorf("verify: --replicas %d needs --database-url (SQLite serves one process)", cfg.Replicas)
		}
		args = append(args, "--data-dir", cfg.DataDir)
	}
	for i := range cfg.Replicas {
		lf, err := os.OpenFile(filepath.Join(cfg.DataDir, fmt.Sprintf("replica-%d.log", i+1)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			c.stop(ctx)
			return nil, err
		}
		c.logs = append(c.logs, lf)
		env := env
		if c.dbURL != "" {
			// Each replica's sessions carry its name, so that a kill can end them (endSessions).
			name := fmt.Sprintf("clasp_verify_replica_%d", i+1)
			u, err := withAppName(c.dbURL, name)
			if err != nil {
				c.stop(ctx)
				return nil, err
			}
			c.appNames = append(c.appNames, name)
			env = append(env, "CLASP_DATABASE_URL="+u)
		}
		srv, err := serveproc.StartServer(ctx, serveproc.ServerConfig{Binary: cfg.Binary, Args: args, Env: env, Log: lf})
		if err != nil {
			c.stop(ctx)
			return nil, fmt.Errorf("verify: start replica %d: %w (see %s)", i+1, err, lf.Name())
		}
		c.servers = append(c.servers, srv)
		if i == 0 {
			c.token = srv.BoardToken()
		}
	}
	c.locks = make([]sync.Mutex, len(c.servers))
	if c.token == "" {
		c.stop(ctx)
		return nil, fmt.Errorf("verify: the first replica printed no board token (the database was not fresh)")
	}
	if cfg.Latency > 0 || cfg.DropEvery > 0 {
		if err := c.startProxies(cfg.Latency); err != nil {
			c.stop(ctx)
			return nil, err
		}
	}
	return c, nil
}

// clientURLs returns the URL clients use for each replica: its proxy's
// when there are proxies, else the replica's.
func (c *cluster) clientURLs() []string {
	if c.proxies == nil {
		return c.urls()
	}
	var out []string
	for _, p := range c.proxies {
		out = append(out, "http://"+p.Listen)
	}
	return out
}

// startProxies puts a toxiproxy proxy on a free loopback port in front of
// each replica (latency and dropped connections between
// clients and servers), with a latency toxic in each direction of
// latency/2 +- latency/2 when latency > 0. A proxy connection is tied to
// the upstream connection it opened when it accepted: bytes it holds
// never reach a later process on the same port, so a kill still bounds
// the calls sent through it.
func (c *cluster) startProxies(latency time.Duration) error {
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	for i, s := range c.servers {
		p := toxiproxy.NewProxy(srv, fmt.Sprintf("replica-%d", i+1), "127.0.0.1:0", s.Addr())
		if err := p.Start(); err != nil {
			return fmt.Errorf("verify: proxy for replica %d: %w", i+1, err)
		}
		c.proxies = append(c.proxies, p)
		if latency <= 0 {
			continue
		}
		half := latency.Milliseconds() / 2
		for _, stream := range []string{"upstream", "downstream"} {
			j := fmt.Sprintf(`{"name":"latency_%s","type":"latency","stream":%q,"attributes":{"latency":%d,"jitter":%d}}`, stream, stream, half, half)
			if _, err := p.Toxics.AddToxicJson(strings.NewReader(j)); err != nil {
				return fmt.Errorf("verify: latency toxic: %w", err)
			}
		}
	}
	return nil
}

// dropConns drops the connections of proxy i for dropFor (the caller
// holds c.locks[i], so no kill or pause of the replica overlaps): a
// reset_peer toxic resets each connection on its next bytes, at random
// on the requests (the server never gets the request: nothing happens)
// or on the answers (the server has served the request and written its
// answer: its effect is over, only the answer is lost). Either way a call
// whose connection was reset is over by the time the client sees the
// reset, so a reset seen during the drop is bounded there (boundUnknowns).
func (c *cluster) dropConns(ctx context.Context, i int, rng *rand.Rand) error {
	p := c.proxies[i]
	stream := "downstream"
	if rng.IntN(2) == 0 {
		stream = "upstream"
	}
	j := fmt.Sprintf(`{"name":"drop","type":"reset_peer","stream":%q,"attributes":{"timeout":0}}`, stream)
	start := time.Now()
	if _, err := p.Toxics.AddToxicJson(strings.NewReader(j)); err != nil {
		return err
	}
	time.Sleep(dropFor)
	err := p.Toxics.RemoveToxic(ctx, "drop")
	c.mu.Lock()
	c.drops[c.servers[i].URL()] = append(c.drops[c.servers[i].URL()], [2]time.Time{start, time.Now()})
	c.mu.Unlock()
	return err
}

// urls returns each replica's URL (stable across restarts).
func (c *cluster) urls() []string {
	var out []string
	for _, s := range c.servers {
		out = append(out, s.URL())
	}
	return out
}

func (c *cluster) count(kind string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.faultErrors = append(c.faultErrors, fmt.Sprintf("%s: %v", kind, err))
		return
	}
	c.faults[kind]++
}

// inject runs the enabled fault kinds until ctx ends, each on its own
// timer: every period (jittered by up to +-50%) one fault of that kind.
func (c *cluster) inject(ctx context.Context, cfg *Config, log io.Writer) *sync.WaitGroup {
	var wg sync.WaitGroup
	loop := func(kind string, every time.Duration, seed uint64, f func(rng *rand.Rand) error) {
		if every <= 0 {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(cfg.Seed), seed)) // #nosec G115 G404 -- a reproducible fault schedule from the seed's bits, not a secret
			for {
				d := every/2 + time.Duration(rng.Int64N(int64(every)))
				t := time.NewTimer(d)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
				err := f(rng)
				c.count(kind, err)
				if err != nil {
					fmt.Fprintf(log, "verify: fault %s failed: %v\n", kind, err)
				}
			}
		}()
	}
	loop(FaultKill, cfg.KillEvery, 101, func(rng *rand.Rand) error {
		i := rng.IntN(len(c.servers))
		c.locks[i].Lock()
		defer c.locks[i].Unlock()
		return c.killRestart(ctx, i)
	})
	loop(FaultPause, cfg.PauseEvery, 102, func(rng *rand.Rand) error {
		i := rng.IntN(len(c.servers))
		c.locks[i].Lock()
		defer c.locks[i].Unlock()
		pid := c.servers[i].PID()
		stopped := time.Now()
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			return err
		}
		defer func() {
			c.mu.Lock()
			c.pauses[c.servers[i].URL()] = append(c.pauses[c.servers[i].URL()], [2]time.Time{stopped, time.Now()})
			c.mu.Unlock()
		}()
		// Past the lease TTL and two sweeps: the other replicas declare
		// the paused replica's runs lost and may hand their issues over;
		// its in-flight writes then land late.
		time.Sleep(cfg.LeaseTTL + 2*cfg.SweepInterval + 500*time.Millisecond)
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			return err
		}
		// Give the resumed process pauseKillAfter to finish what it had in
		// flight (those late writes are what this fault tests: they must
		// not win after the other replicas declared its runs lost), then
		// SIGKILL and restart it: calls it never answered are then bounded
		// by the kill (boundUnknowns) instead of staying open to the end
		// of the history.
		time.Sleep(pauseKillAfter)
		return c.killRestart(ctx, i)
	})
	if c.dbURL != "" {
		loop(FaultTerminate, cfg.TerminateEvery, 103, func(*rand.Rand) error {
			c.dbMu.Lock()
			defer c.dbMu.Unlock()
			n, err := c.terminateBackends(ctx)
			c.mu.Lock()
			c.terminated += n
			c.mu.Unlock()
			return err
		})
		if cfg.DBRestartCmd != "" {
			loop(FaultDBRestart, cfg.RestartDBEvery, 105, func(*rand.Rand) error {
				c.dbMu.Lock()
				defer c.dbMu.Unlock()
				return c.restartDB(ctx, cfg.DBRestartCmd)
			})
		}
		if cfg.FailoverCmd != "" {
			loop(FaultFailover, cfg.FailoverEvery, 106, func(*rand.Rand) error {
				c.dbMu.Lock()
				defer c.dbMu.Unlock()
				start := time.Now()
				out, err := c.runDBCmd(ctx, cfg.FailoverCmd)
				end := time.Now()
				if at, ok := killedAt(out); ok && !at.Before(start) && !at.After(end) {
					start = at
				}
				c.mu.Lock()
				c.failovers = append(c.failovers, [2]time.Time{start, end})
				c.mu.Unlock()
				return err
			})
		}
	}
	if c.proxies != nil {
		loop(FaultDrop, cfg.DropEvery, 104, func(rng *rand.Rand) error {
			i := rng.IntN(len(c.proxies))
			c.locks[i].Lock()
			defer c.locks[i].Unlock()
			return c.dropConns(ctx, i, rng)
		})
	}
	return &wg
}

// pauseKillAfter is how long a replica resumed after a pause runs before
// the pause fault SIGKILLs and restarts it.
const pauseKillAfter = time.Second

// killRestart SIGKILLs replica i (the caller holds c.locks[i]), records
// when it was reaped, and restarts it on the same port.
//
// With proxies, the replica's proxy is disabled first and enabled again
// once the new process listens: calls made meanwhile are refused at
// connect (they did not happen and are not recorded) instead of being
// accepted by the proxy and cut when it fails to reach the dead process
// (an unknown outcome the client cannot tell from a real one).
func (c *cluster) killRestart(ctx context.Context, i int) error {
	if c.proxies != nil {
		c.proxies[i].Stop()
	}
	c.servers[i].Kill()
	k := kill{at: time.Now()}
	if c.dbURL != "" {
		if err := c.endSessions(ctx, c.appNames[i]); err == nil {
			k.over = time.Now()
		}
	}
	c.mu.Lock()
	c.killed[c.servers[i].URL()] = append(c.killed[c.servers[i].URL()], k)
	c.mu.Unlock()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := c.servers[i].Restart(rctx); err != nil {
		return err
	}
	if c.proxies != nil {
		return c.proxies[i].Start()
	}
	return nil
}

// restartDB runs the shell command cmd (sh -c) that restarts the
// PostgreSQL server (or fails it over), within 2 minutes; its output goes
// to the first replica's log. The error, when cmd fails, ends with the
// last lines cmd wrote on stderr (see runDBCmd).
func (c *cluster) restartDB(ctx context.Context, cmd string) error {
	_, err := c.runDBCmd(ctx, cmd)
	return err
}

// dbCmdErrLines is how many of its last stderr lines a failed database
// command's error carries.
const dbCmdErrLines = 8

// runDBCmd runs the shell command cmd (sh -c) within 2 minutes and returns
// what it printed on stdout. Both its stdout and stderr also go to the
// first replica's log. When cmd fails (a non-zero exit, or killed at the
// 2-minute limit), the error names cmd and its exit, followed by the last
// dbCmdErrLines lines of its stderr, so that the reason a restart or
// failover failed is in verify's own report and not only in a log file.
func (c *cluster) runDBCmd(ctx context.Context, cmd string) (string, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	var out, errOut strings.Builder
	x := exec.CommandContext(rctx, "sh", "-c", cmd) // #nosec G204 -- the operator's PostgreSQL restart or failover command, a shell command by design
	x.Stdout, x.Stderr = &out, &errOut
	if len(c.logs) > 0 {
		x.Stdout, x.Stderr = io.MultiWriter(&out, c.logs[0]), io.MultiWriter(&errOut, c.logs[0])
	}
	if err := x.Run(); err != nil {
		if tail := lastLines(errOut.String(), dbCmdErrLines); tail != "" {
			return out.String(), fmt.Errorf("%s: %w; its stderr ended with:\n%s", cmd, err, tail)
		}
		return out.String(), fmt.Errorf("%s: %w", cmd, err)
	}
	return out.String(), nil
}

// lastLines returns the last n non-empty lines of s, each indented by a
// tab, joined by newlines; "" when s has none.
func lastLines(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, "\t"+strings.TrimRight(l, "\r"))
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// killedAt reads the line killed_at_unix_ns=N a failover command prints
// when it killed the primary (scripts/pg-failover.sh).
func killedAt(out string) (time.Time, bool) {
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "killed_at_unix_ns="); ok {
			if ns, err := strconv.ParseInt(v, 10, 64); err == nil {
				return time.Unix(0, ns), true
			}
		}
	}
	return time.Time{}, false
}

// waitDatabase returns once a connection to the database at u succeeds,
// trying for up to 30 s while it is refused with 3D000 (the database does
// not exist): with a multi-host URL pgx stops at the first host that says
// so, and a standby named before the primary has the freshly created
// database only once it has replayed its creation.
func waitDatabase(ctx context.Context, u string) error {
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(wctx, u)
		if err == nil {
			return conn.Close(wctx)
		}
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "3D000" {
			return fmt.Errorf("verify: connect to the new database: %w", err)
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("verify: the new database is still missing on a host: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// withAppName returns the PostgreSQL URL u with application_name set to name.
func withAppName(u, name string) (string, error) {
	p, err := url.Parse(u)
	if err != nil {
		return "", fmt.Errorf("verify: database URL: %w", err)
	}
	q := p.Query()
	q.Set("application_name", name)
	p.RawQuery = q.Encode()
	return p.String(), nil
}

// endSessions ends the database sessions of a replica just killed (those
// with application_name name) with pg_terminate_backend and returns once
// none is left, within 5 s: a backend finishes the statement it is in
// (a COMMIT the dead process sent) before it exits, so from then on
// nothing the killed process sent can take effect. An error (the
// database unreachable, or sessions still there after 5 s) says nothing
// is known.
func (c *cluster) endSessions(ctx context.Context, name string) error {
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(tctx, c.dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(tctx))
	for {
		var left int
		err := conn.QueryRow(tctx, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE application_name = $1 AND pid <> pg_backend_pid()) t`, name).Scan(&left)
		if err != nil {
			return err
		}
		if left == 0 {
			return nil
		}
		select {
		case <-tctx.Done():
			return tctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// terminateBackends ends every connection to the throwaway database but
// its own, with pg_terminate_backend, and returns how many it ended.
func (c *cluster) terminateBackends(ctx context.Context) (int, error) {
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(tctx, c.dbURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.WithoutCancel(tctx))
	var n int
	err = conn.QueryRow(tctx, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend') t`).Scan(&n)
	return n, err
}

// heal resumes and restarts whatever a fault left stopped, once the
// injectors have stopped.
func (c *cluster) heal(ctx context.Context) error {
	for i, s := range c.servers {
		c.locks[i].Lock()
		if pid := s.PID(); pid != 0 {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
		var err error
		if !s.Running() {
			err = s.Restart(ctx)
		}
		c.locks[i].Unlock()
		if err != nil {
			return fmt.Errorf("verify: restart replica %d: %w", i+1, err)
		}
	}
	return nil
}

// killAll SIGKILLs and restarts every replica, once the clients and
// injectors have stopped: every call still unknown then has a kill after
// it, which bounds it (boundUnknowns), so no unknown outcome stays open
// to the end of the history.
func (c *cluster) killAll(ctx context.Context) error {
	for i := range c.servers {
		c.locks[i].Lock()
		err := c.killRestart(ctx, i)
		c.locks[i].Unlock()
		if err != nil {
			return fmt.Errorf("verify: restart replica %d: %w", i+1, err)
		}
	}
	return nil
}

// stop stops the replicas and drops the throwaway database.
func (c *cluster) stop(ctx context.Context) {
	for _, p := range c.proxies {
		p.Stop()
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for _, s := range c.servers {
		if pid := s.PID(); pid != 0 {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
		_ = s.Stop(sctx)
	}
	for _, f := range c.logs {
		_ = f.Close() // log of a stopped replica: nothing is left to report to
	}
	if c.drop != nil {
		_ = c.drop(sctx)
	}
}
