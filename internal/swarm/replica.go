package swarm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clasp-dev/clasp/internal/serveproc"
)

// replicaSet is the swarm's N `clasp serve` child processes on one
// PostgreSQL database (Config.DatabaseURL), each on its own loopback port.
type replicaSet struct {
	servers []*serveproc.Server
	logs    []*os.File
	token   string // the board token (printed by the first replica on a fresh database, or Config.BoardToken)

	mu       sync.Mutex
	kills    int      // SIGKILLs sent by killLoop
	restarts int      // restarts after them
	failures []string // restarts that failed
}

// startReplicas starts cfg.Replicas processes of `clasp serve`
// (cfg.ServerBinary) against cfg.DatabaseURL, passed in the
// environment (CLASP_DATABASE_URL, so that the URL and its password never
// show in the process list), with the swarm's lease TTL and sweep interval.
// Their logs go to logDir/replica-N.log, their board-token file to
// dataDir/replicas.
//
// The board token: every replica checks bearer tokens against the hash
// stored in the database, so a replica never needs the token itself; only
// the swarm does. The first replica is started alone: on a fresh database
// it creates the token and prints it, and the swarm reads it from its
// banner. When the database already has a token (a second swarm on the
// same database), only its hash is stored, and the swarm needs
// cfg.BoardToken (--token or CLASP_TOKEN); without it startReplicas fails.
// The other replicas start once the first one is up.
func startReplicas(ctx context.Context, cfg *Config, dataDir, logDir string) (*replicaSet, error) {
	args := []string{
		"--data-dir", filepath.Join(dataDir, "replicas"),
		"--lease-ttl", cfg.LeaseTTL.String(),
		"--sweep-interval", cfg.SweepInterval.String(),
	}
	rs := &replicaSet{}
	for i := range cfg.Replicas {
		logFile, err := os.OpenFile(filepath.Join(logDir, fmt.Sprintf("replica-%d.log", i+1)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600) // #nosec G304 -- a log file under the swarm's own data directory
		if err != nil {
			rs.stop(ctx)
			return nil, fmt.Errorf("create replica log: %w", err)
		}
		rs.logs = append(rs.logs, logFile) // open for the restarts too; closed by stop
		srv, err := serveproc.StartServer(ctx, serveproc.ServerConfig{
			Binary: cfg.ServerBinary,
			Args:   args,
			Env:    []string{"CLASP_DATABASE_URL=" + cfg.DatabaseURL},
			Log:    logFile,
		})
		if err != nil {
			rs.stop(ctx)
			return nil, fmt.Errorf("start replica %d: %w (see %s)", i+1, err, logFile.Name())
		}
		rs.servers = append(rs.servers, srv)
		if i == 0 {
			rs.token = srv.BoardToken()
			if rs.token == "" {
				rs.token = cfg.BoardToken
			}
			if rs.token == "" {
				rs.stop(ctx)
				return nil, errors.New("the database already has a board token (only its hash is stored): pass it with --token or " +
					"CLASP_TOKEN, or give the swarm a fresh database")
			}
		}
	}
	return rs, nil
}

// urls returns the replicas' roots, starting at replica n (mod N): the
// list an agent process gets, so that agents spread over the replicas and
// each fails over to the next.
func (rs *replicaSet) urls(n int) []string {
	out := make([]string, len(rs.servers))
	for i := range rs.servers {
		out[i] = rs.servers[(n+i)%len(rs.servers)].URL()
	}
	return out
}

// killLoop kills a random replica with SIGKILL every interval and restarts
// it at once on the same port and database, until ctx ends. A replica
// whose restart failed is restarted again at the next tick.
func (rs *replicaSet) killLoop(ctx context.Context, every time.Duration, logf func(string, ...any)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// select picks at random when both are ready: a tick after the end
		// must not kill (nor count a kill) that no restart will follow.
		if ctx.Err() != nil {
			return
		}
		for i, s := range rs.servers {
			if !s.Running() {
				rs.restart(ctx, i, logf)
			}
		}
		i := rand.IntN(len(rs.servers)) // #nosec G404 -- fault injection (which replica to kill), not a secret
		s := rs.servers[i]
		if ctx.Err() != nil || !s.Running() {
			continue // its restart above was cut short by the end: nothing to kill
		}
		pid := s.PID()
		s.Kill()
		rs.mu.Lock()
		rs.kills++
		rs.mu.Unlock()
		logf("SIGKILL replica %d (pid %d, %s); restarting it on the same port", i+1, pid, s.Addr())
		rs.restart(ctx, i, logf)
	}
}

// restart restarts replica i, recording a failure.
func (rs *replicaSet) restart(ctx context.Context, i int, logf func(string, ...any)) {
	err := rs.servers[i].Restart(ctx)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			rs.failures = append(rs.failures, fmt.Sprintf("restart replica %d: %v", i+1, err))
			logf("restart replica %d failed: %v", i+1, err)
		}
		return
	}
	rs.restarts++
}

// ensureRunning restarts every replica that is not running (one whose
// restart failed), so that the final checks reach them all.
func (rs *replicaSet) ensureRunning(ctx context.Context, logf func(string, ...any)) {
	for i, s := range rs.servers {
		if !s.Running() {
			rs.restart(ctx, i, logf)
		}
	}
}

// stop shuts every replica down (SIGTERM; SIGKILL after 10 s).
func (rs *replicaSet) stop(ctx context.Context) {
	var wg sync.WaitGroup
	for _, s := range rs.servers {
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_ = s.Stop(sctx)
		})
	}
	wg.Wait()
	for _, f := range rs.logs {
		_ = f.Close() // log of a stopped replica: nothing is left to report to
	}
}

// failoverTransport sends each request to the current one of several
// replicas (servers on one database, so any of them answers the same) and
// moves on to the next when it cannot connect: a request that was never
// sent (the dial failed) is sent to the next replica at once; any other
// transport error (the connection broke after the request went out) is
// returned, for the caller to handle as a lost answer, and the next
// request goes to the next replica.
type failoverTransport struct {
	hosts []string // host:port of each replica, in order of preference
	cur   atomic.Int64
	base  http.RoundTripper
}

// newFailoverClient returns an HTTP client (timeout per request) whose
// requests go to the first of urls and fail over to the others. With one
// URL it is a plain client.
func newFailoverClient(urls []string, timeout time.Duration) (*http.Client, error) {
	base := http.DefaultTransport.(*http.Transport).Clone()
	if len(urls) < 2 {
		return &http.Client{Transport: base, Timeout: timeout}, nil
	}
	ft := &failoverTransport{base: base}
	for _, s := range urls {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("replica URL %q: want http://host:port", s)
		}
		ft.hosts = append(ft.hosts, u.Host)
	}
	return &http.Client{Transport: ft, Timeout: timeout}, nil
}

// RoundTrip implements http.RoundTripper.
func (f *failoverTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var lastErr error
	for i := range f.hosts {
		n := f.cur.Load()
		r := req.Clone(req.Context())
		r.URL.Host = f.hosts[int(n)%len(f.hosts)]
		r.Host = r.URL.Host
		if i > 0 && req.Body != nil && req.Body != http.NoBody {
			if req.GetBody == nil {
				return nil, lastErr
			}
			body, err := req.GetBody()
			if err != nil {
				return nil, lastErr
			}
			r.Body = body
		}
		resp, err := f.base.RoundTrip(r)
		if err == nil {
			return resp, nil
		}
		f.cur.CompareAndSwap(n, n+1)
		if !isDialError(err) || req.Context().Err() != nil {
			return nil, err
		}
		lastErr = err
	}
	return nil, lastErr
}

// CloseIdleConnections closes the base transport's idle connections.
func (f *failoverTransport) CloseIdleConnections() {
	if ci, ok := f.base.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// isDialError reports whether err is a failure to connect: the request was
// not sent.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
