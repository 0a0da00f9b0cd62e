package cli

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clasp-dev/clasp/internal/serveproc"
)

// freePort returns a loopback host:port nothing listens on (it was free a
// moment ago).
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// forward accepts on ln and copies each connection to and from target
// until ln is closed: a database that becomes reachable on ln's port.
func forward(ln net.Listener, target string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			u, err := net.Dial("tcp", target)
			if err != nil {
				return
			}
			defer u.Close()
			go func() { _, _ = io.Copy(u, c); u.Close() }()
			_, _ = io.Copy(c, u)
		}()
	}
}

// testDatabase creates a throwaway database on $CLASP_TEST_POSTGRES_URL
// (skipping without it) and returns its URL, dropped at the end.
func testDatabase(t *testing.T) *url.URL {
	t.Helper()
	admin := os.Getenv(serveproc.EnvTestPostgresURL)
	if admin == "" {
		t.Skip(serveproc.EnvTestPostgresURL + " is not set: no PostgreSQL to test against")
	}
	ctx := context.Background()
	dbURL, drop, err := serveproc.CreateDatabase(ctx, admin, "clasp_dbwait")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drop(context.Background()) })
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestServeWaitsForDatabase: serve started while its PostgreSQL is
// unreachable listens at once, answers /readyz 503 unavailable (the JSON
// error body) and /healthz 200, logs each failed try, and starts serving
// by itself once the database becomes reachable.
func TestServeWaitsForDatabase(t *testing.T) {
	u := testDatabase(t)
	realAddr := u.Host
	dbAddr := freePort(t) // nothing listens there yet: connection refused
	u.Host = dbAddr
	listen := freePort(t)
	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan ServeInfo, 1)
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ServeConfig{DataDir: t.TempDir(), DatabaseURL: u.String(), Listen: listen, DBWait: time.Minute,
			Logger: slog.New(slog.NewTextHandler(logs, nil))}, ready)
	}()
	var stopOnce sync.Once
	stop := func() {
		stopOnce.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	defer stop()

	get := func(path string) (int, map[string]any, error) {
		res, err := http.Get("http://" + listen + path)
		if err != nil {
			return 0, nil, err
		}
		defer res.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
			return res.StatusCode, nil, err
		}
		return res.StatusCode, body, nil
	}
	// Listening while the database is down: 503 unavailable with the error body.
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, body, err := get("/readyz")
		if err == nil {
			if st != http.StatusServiceUnavailable || body["code"] != "unavailable" || body["error"] == "" {
				t.Fatalf("/readyz while the database is down: %d %v, want 503 unavailable", st, body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve never listened while waiting for the database: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st, body, err := get("/healthz"); err != nil || st != http.StatusOK || body["status"] != "starting" {
		t.Fatalf("/healthz while waiting: %d %v %v, want 200 starting", st, body, err)
	}
	if st, body, err := get("/api/companies"); err != nil || st != http.StatusServiceUnavailable || body["code"] != "unavailable" {
		t.Fatalf("/api/companies while waiting: %d %v %v, want 503 unavailable", st, body, err)
	}
	// The caller's request id comes back, in the header and the body.
	req, _ := http.NewRequest(http.MethodGet, "http://"+listen+"/api/companies", nil)
	req.Header.Set("X-Request-Id", "wait-probe-1")
	if res, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		var body struct {
			Details map[string]any `json:"details"`
		}
		_ = json.NewDecoder(res.Body).Decode(&body)
		res.Body.Close()
		if res.Header.Get("X-Request-Id") != "wait-probe-1" || body.Details["requestId"] != "wait-probe-1" {
			t.Errorf("while waiting: X-Request-Id %q, details %v; want the caller's id in both", res.Header.Get("X-Request-Id"), body.Details)
		}
	}
	for !strings.Contains(logs.String(), "database unreachable; retrying") {
		if time.Now().After(deadline) {
			t.Fatalf("no retry logged; log:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case info := <-ready:
		t.Fatalf("ready before the database was reachable: %+v", info)
	case err := <-done:
		t.Fatalf("Serve gave up while its wait had time left: %v", err)
	default:
	}

	// The database becomes reachable on its address: serving resumes by itself.
	ln, err := net.Listen("tcp", dbAddr)
	if err != nil {
		t.Fatalf("listen on the database's address again: %v", err)
	}
	defer ln.Close()
	go forward(ln, realAddr)
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Serve: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("serve did not start within a minute of the database coming up")
	}
	if st, body, err := get("/readyz"); err != nil || st != http.StatusOK {
		t.Fatalf("/readyz once the database is up: %d %v %v, want 200", st, body, err)
	}
	stop()
}

// TestServeDBWaitLimit: past --db-wait serve gives up with an error naming
// the limit, having retried; with no wait (negative) it fails at the first
// try; bad credentials are never retried.
func TestServeDBWaitLimit(t *testing.T) {
	u := testDatabase(t)
	good := *u
	u.Host = freePort(t)
	for _, tc := range []struct {
		name    string
		url     string
		wait    time.Duration
		want    string
		retried bool
	}{
		{"limit", u.String(), 1500 * time.Millisecond, "--db-wait", true},
		{"no wait", u.String(), -1, "--db-wait", false},
		{"bad user", strings.Replace(good.String(), good.User.Username()+"@", "no_such_role_x@", 1), time.Minute, "no_such_role_x", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &syncBuffer{}
			err := Serve(context.Background(), ServeConfig{DataDir: t.TempDir(), DatabaseURL: tc.url, Listen: "127.0.0.1:0", DBWait: tc.wait,
				Logger: slog.New(slog.NewTextHandler(logs, nil))}, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Serve = %v, want an error containing %q", err, tc.want)
			}
			if got := strings.Contains(logs.String(), "database unreachable; retrying"); got != tc.retried {
				t.Fatalf("retried = %v, want %v; log:\n%s", got, tc.retried, logs.String())
			}
		})
	}
}
