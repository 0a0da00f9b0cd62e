package cli

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/clasp-dev/clasp/internal/httpapi"
	"github.com/clasp-dev/clasp/internal/server"
	"github.com/clasp-dev/clasp/internal/store/postgres"
)

// openStoreWaiting opens the store for Serve (openStoreOpts, with the
// request deadline as PostgreSQL's statement timeout). On PostgreSQL, while
// the database is unreachable (postgres.IsUnavailable: connection refused,
// starting up, every host a standby) it tries again with backoff (250 ms,
// doubling up to 5 s), logging each failure, for up to cfg.DBWait; meanwhile
// the listener answers httpapi.StartingHandler (/healthz 200, everything
// else 503 unavailable, /readyz included), and once the store is open the
// listener is handed back for the server (m.ln). It returns the last error
// when the wait runs out, ctx's error when ctx ends first, and any other
// error at once.
func (m *serveMain) openStoreWaiting(ctx context.Context) (migratedStore, error) {
	cfg := m.cfg
	open := func() (migratedStore, error) {
		return openStoreOpts(ctx, cfg.DatabaseURL, m.info.DBPath, m.log, cfg.Sync,
			postgres.Options{MaxConns: int32(cfg.DBMaxConns), StatementTimeout: max(cfg.RequestDeadline, 0)}) // #nosec G115 -- --db-max-conns is checked to be 0..10000 before this
	}
	st, err := open()
	if err == nil || cfg.DatabaseURL == "" || !postgres.IsUnavailable(err) || cfg.DBWait <= 0 {
		if err != nil && cfg.DatabaseURL != "" && postgres.IsUnavailable(err) {
			return nil, fmt.Errorf("the database is unreachable (no waiting, --db-wait 0): %w", err)
		}
		return st, err
	}
	feed := newConnFeed(m.ln)
	stopWaiting := serveStarting(feed.listener(), m.tls, m.log)
	m.ln = feed.listener() // the server's from now on; closing it closes the real listener
	defer stopWaiting()
	giveUp := time.Now().Add(cfg.DBWait)
	wait := 250 * time.Millisecond
	for {
		if time.Now().Add(wait).After(giveUp) {
			return nil, fmt.Errorf("the database stayed unreachable (waited %s, --db-wait): %w", cfg.DBWait, err)
		}
		m.log.Warn("database unreachable; retrying", "err", err, "in", wait, "give_up_at", giveUp.UTC().Format(time.RFC3339))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 5*time.Second)
		if st, err = open(); err == nil || !postgres.IsUnavailable(err) || ctx.Err() != nil {
			return st, err
		}
	}
}

// serveStarting serves httpapi.StartingHandler on ln (with TLS when
// tlsCfg is set) until the returned stop, which closes ln and waits up to
// 5 s for the requests in flight.
func serveStarting(ln net.Listener, tlsCfg *tls.Config, log *slog.Logger) (stop func()) {
	hs := &http.Server{
		Handler:           httpapi.StartingHandler("The server is starting: its database is not reachable yet; retry shortly."),
		ReadHeaderTimeout: server.ReadHeaderTimeout,
		MaxHeaderBytes:    httpapi.HeaderReadLimit,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		TLSConfig:         tlsCfg,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if tlsCfg != nil {
			_ = hs.ServeTLS(ln, "", "") // ends with ErrServerClosed at stop
			return
		}
		_ = hs.Serve(ln) // ends with ErrServerClosed at stop
	}()
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil {
			_ = hs.Close() // requests still in flight after 5 s: their connections are closed
		}
		<-done
	}
}

// connFeed accepts connections on one listener for several successive
// listeners (listener): the starting server's while the database is
// awaited, then the real server's, without closing the socket in between.
// Closing a listener it gave ends only that one's Accept; the last one
// given closes the real listener too.
type connFeed struct {
	ln    net.Listener
	conns chan net.Conn
	errc  chan error

	mu   sync.Mutex
	last *feedListener
}

func newConnFeed(ln net.Listener) *connFeed {
	f := &connFeed{ln: ln, conns: make(chan net.Conn), errc: make(chan error, 1)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				f.errc <- err
				close(f.conns)
				return
			}
			f.conns <- c
		}
	}()
	return f
}

// listener returns a new listener fed by f; it becomes the one whose Close
// closes the real listener.
func (f *connFeed) listener() net.Listener {
	l := &feedListener{f: f, closed: make(chan struct{})}
	f.mu.Lock()
	f.last = l
	f.mu.Unlock()
	return l
}

type feedListener struct {
	f      *connFeed
	once   sync.Once
	closed chan struct{}
}

func (l *feedListener) Accept() (net.Conn, error) {
	select {
	case <-l.closed:
		return nil, net.ErrClosed
	case c, ok := <-l.f.conns:
		if !ok {
			return nil, net.ErrClosed
		}
		return c, nil
	}
}

func (l *feedListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	l.f.mu.Lock()
	last := l.f.last == l
	l.f.mu.Unlock()
	if last {
		return l.f.ln.Close()
	}
	return nil
}

func (l *feedListener) Addr() net.Addr { return l.f.ln.Addr() }
