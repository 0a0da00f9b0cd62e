package verify

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/clasp-dev/clasp/internal/crashtest"
	"github.com/jackc/pgx/v5"
)

// Fault kinds, the keys of Report.Faults.
const (
	FaultKill      = "kill"      // a replica SIGKILLed and restarted on the same port
	FaultPause     = "pause"     // a replica SIGSTOPped past the lease TTL, then SIGCONTed
	FaultTerminate = "terminate" // pg_terminate_backend of the replicas' connections (one pass)
)

// cluster is the process mode's replicas: `clasp serve` child processes
// on one SQLite data directory (one replica) or one throwaway PostgreSQL
// database (any number), and the fault injectors that hit them.
type cluster struct {
	servers []*crashtest.Server
	locks   []sync.Mutex // one per replica: a kill and a pause never overlap
	logs    []*os.File
	token   string
	dbURL   string // the throwaway database ("" on SQLite)
	drop    func(context.Context) error

	mu          sync.Mutex
	faults      map[string]int
	terminated  int                    // backends pg_terminate_backend ended
	killed      map[string][]time.Time // per replica URL, when each SIGKILL had reaped the process
	faultErrors []string
}

// startCluster starts cfg.Replicas servers (see Config.Binary). On
// PostgreSQL it first creates a throwaway database on the server of
// cfg.DatabaseURL (its user needs CREATEDB), dropped by stop.
func startCluster(ctx context.Context, cfg *Config) (*cluster, error) {
	c := &cluster{faults: map[string]int{}, killed: map[string][]time.Time{}}
	args := []string{"--lease-ttl", cfg.LeaseTTL.String(), "--sweep-interval", cfg.SweepInterval.String(), "--log-level", "warn"}
	var env []string
	if cfg.DatabaseURL != "" {
		u, drop, err := crashtest.CreateDatabase(ctx, cfg.DatabaseURL, "clasp_verify")
		if err != nil {
			return nil, err
		}
		c.dbURL, c.drop = u, drop
		env = []string{"CLASP_DATABASE_URL=" + u}
		args = append(args, "--data-dir", filepath.Join(cfg.DataDir, "replicas"))
	} else {
		if cfg.Replicas > 1 {
			return nil, fmt.Errorf("verify: --replicas %d needs --database-url (SQLite serves one process)", cfg.Replicas)
		}
		args = append(args, "--data-dir", cfg.DataDir)
	}
	for i := range cfg.Replicas {
		lf, err := os.OpenFile(filepath.Join(cfg.DataDir, fmt.Sprintf("replica-%d.log", i+1)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			c.stop(ctx)
			return nil, err
		}
		c.logs = append(c.logs, lf)
		srv, err := crashtest.StartServer(ctx, crashtest.ServerConfig{Binary: cfg.Binary, Args: args, Env: env, Log: lf})
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
	return c, nil
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
			rng := rand.New(rand.NewPCG(uint64(cfg.Seed), seed))
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
		c.servers[i].Kill()
		c.mu.Lock()
		c.killed[c.servers[i].URL()] = append(c.killed[c.servers[i].URL()], time.Now())
		c.mu.Unlock()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		return c.servers[i].Restart(rctx)
	})
	loop(FaultPause, cfg.PauseEvery, 102, func(rng *rand.Rand) error {
		i := rng.IntN(len(c.servers))
		c.locks[i].Lock()
		defer c.locks[i].Unlock()
		pid := c.servers[i].PID()
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			return err
		}
		// Past the lease TTL and two sweeps: the other replicas declare
		// the paused replica's runs lost and may hand their issues over;
		// its in-flight writes then land late.
		time.Sleep(cfg.LeaseTTL + 2*cfg.SweepInterval + 500*time.Millisecond)
		return syscall.Kill(pid, syscall.SIGCONT)
	})
	if c.dbURL != "" {
		loop(FaultTerminate, cfg.TerminateEvery, 103, func(*rand.Rand) error {
			n, err := c.terminateBackends(ctx)
			c.mu.Lock()
			c.terminated += n
			c.mu.Unlock()
			return err
		})
	}
	return &wg
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

// stop stops the replicas and drops the throwaway database.
func (c *cluster) stop(ctx context.Context) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for _, s := range c.servers {
		if pid := s.PID(); pid != 0 {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
		_ = s.Stop(sctx)
	}
	for _, f := range c.logs {
		f.Close()
	}
	if c.drop != nil {
		_ = c.drop(sctx)
	}
}
