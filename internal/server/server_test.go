package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clasp-dev/clasp/internal/heartbeat"
	"github.com/clasp-dev/clasp/internal/httpapi"
	"github.com/clasp-dev/clasp/internal/serveproc"
	"github.com/clasp-dev/clasp/internal/store"
	"github.com/clasp-dev/clasp/internal/store/postgres"
	"github.com/clasp-dev/clasp/internal/store/sqlite"
)

// openStores returns a fresh store of each kind, closed at cleanup: SQLite
// in a temporary directory, and PostgreSQL in a throwaway database of
// CLASP_TEST_POSTGRES_URL (skipped without it, unless CI is set: then it
// fails).
func openStores(t *testing.T) map[string]func(t *testing.T) store.HeartbeatStore {
	return map[string]func(t *testing.T) store.HeartbeatStore{
		"sqlite": func(t *testing.T) store.HeartbeatStore {
			stDrv, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "clasp.db"), sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			st := store.New(stDrv)
			t.Cleanup(func() { _ = st.Close() })
			return st
		},
		"postgres": func(t *testing.T) store.HeartbeatStore {
			admin := os.Getenv(serveproc.EnvTestPostgresURL)
			if admin == "" {
				if os.Getenv("CI") != "" {
					t.Fatalf("%s is not set in CI", serveproc.EnvTestPostgresURL)
				}
				t.Skipf("%s is not set: no PostgreSQL to test against", serveproc.EnvTestPostgresURL)
			}
			u, drop, err := serveproc.CreateDatabase(t.Context(), admin, "clasp_server")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = drop(context.Background()) })
			stDrv, err := postgres.Open(t.Context(), u, postgres.Options{})
			if err != nil {
				t.Fatal(err)
			}
			st := store.New(stDrv)
			t.Cleanup(func() { _ = st.Close() })
			return st
		},
	}
}

// get sends GET path to srv (with the board token when not "") and
// returns the status, the Content-Type and the body.
func get(t *testing.T, srv *Server, path, token string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", srv.URL()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", path, err)
	}
	return res.StatusCode, res.Header.Get("Content-Type"), string(b)
}

var sweepsRe = regexp.MustCompile(`(?m)^clasp_sweeps_total (\d+)`)

// TestStartServesTheWholeServer: Start serves, on one listener, the API
// (/api, /healthz, /metrics), the board at / and the MCP endpoint at
// /mcp; its sweeper runs and counts on the server's /metrics; with Agents
// the scheduler registers this process as an instance and Shutdown ends
// its lease; without Agents no instance is registered.
func TestStartServesTheWholeServer(t *testing.T) {
	for name, open := range openStores(t) {
		t.Run(name, func(t *testing.T) {
			for _, agents := range []bool{true, false} {
				t.Run("agents="+strconv.FormatBool(agents), func(t *testing.T) {
					st := open(t)
					board, hash := httpapi.NewToken(httpapi.TokenBoard)
					if _, err := st.SettingPutIfAbsent(t.Context(), "board_token_hash", hash); err != nil {
						t.Fatal(err)
					}
					ln, err := net.Listen("tcp", "127.0.0.1:0")
					if err != nil {
						t.Fatal(err)
					}
					cfg := Config{Store: st, SweepInterval: 20 * time.Millisecond, RunLogDir: t.TempDir()}
					if agents {
						cfg.Agents = &Agents{WorkDir: t.TempDir()}
					}
					srv, err := Start(t.Context(), ln, cfg)
					if err != nil {
						t.Fatal(err)
					}
					stopped := false
					t.Cleanup(func() {
						if !stopped {
							_ = srv.Shutdown(context.Background())
						}
					})

					if code, _, body := get(t, srv, "/healthz", ""); code != http.StatusOK {
						t.Errorf("/healthz: %d %s", code, body)
					}
					if code, ctype, body := get(t, srv, "/api/companies", board); code != http.StatusOK || !strings.HasPrefix(ctype, "application/json") || !strings.HasPrefix(body, "[") {
						t.Errorf("/api/companies: %d %s %.200s, want 200 and a JSON array", code, ctype, body)
					}
					if code, ctype, _ := get(t, srv, "/", ""); code != http.StatusOK || !strings.HasPrefix(ctype, "text/html") {
						t.Errorf("/ (the board): %d %s, want 200 text/html", code, ctype)
					}
					if code, _, body := get(t, srv, "/mcp", ""); code == http.StatusNotFound || strings.Contains(body, `"code":"not_found"`) {
						t.Errorf("/mcp: %d %.200s, want the MCP endpoint, not the API's 404", code, body)
					}

					// The sweeper passes at start and every 20 ms; wait for
					// one on /metrics (the deadline only keeps a broken
					// wiring from hanging the test).
					deadline := time.Now().Add(30 * time.Second)
					for {
						_, _, body := get(t, srv, "/metrics", board)
						if m := sweepsRe.FindStringSubmatch(body); m != nil && m[1] != "0" {
							break
						}
						if time.Now().After(deadline) {
							t.Fatalf("no sweep counted on /metrics: %.500s", body)
						}
						time.Sleep(20 * time.Millisecond)
					}

					live := func() int {
						ins, err := st.InstanceList(t.Context(), heartbeat.DefaultHostID())
						if err != nil {
							t.Fatal(err)
						}
						n := 0
						for _, in := range ins {
							if in.PID == os.Getpid() && !in.Expired {
								n++
							}
						}
						return n
					}
					want := 0
					if agents {
						want = 1
					}
					if n := live(); n != want {
						t.Errorf("live instances of this process while serving: %d, want %d", n, want)
					}
					if err := srv.Shutdown(t.Context()); err != nil {
						t.Errorf("Shutdown: %v", err)
					}
					stopped = true
					if n := live(); n != 0 {
						t.Errorf("live instances of this process after Shutdown: %d, want 0 (its lease ended)", n)
					}
					if _, err := http.Get(srv.URL() + "/healthz"); err == nil {
						t.Errorf("GET /healthz after Shutdown succeeded, want the listener closed")
					}
				})
			}
		})
	}
}

// TestStartWithoutStoreClosesListener: a Config without Store is an error,
// and the listener Start was given is closed.
func TestStartWithoutStoreClosesListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Start(t.Context(), ln, Config{}); err == nil {
		t.Fatal("Start without a store succeeded")
	}
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Errorf("the listener still accepts connections after a failed Start")
	}
}

// TestMCPMeetsTheAPILimits: /mcp is held to the API's per-address rate
// limit and header cap, answered as the API's JSON errors, and a tool call
// takes one request from the client's allowance however many API calls
// its tool makes in process.
func TestMCPMeetsTheAPILimits(t *testing.T) {
	st := openStores(t)["sqlite"](t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const burst = 4
	srv, err := Start(t.Context(), ln, Config{Store: st, RunLogDir: t.TempDir(),
		Limits: httpapi.Limits{AddressRate: 0.001, AddressBurst: burst}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })

	post := func(body string, header map[string]string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL()+"/mcp", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	// A tool call whose tool calls the API (here answered 401: the
	// credential is not one).
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"session_status","arguments":{}}}`
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	auth := map[string]string{"Authorization": "Bearer clasp_ak_nope"}
	if res, body := post(call, auth); res.StatusCode != http.StatusOK || !strings.Contains(body, "isError") {
		t.Fatalf("tool call: %d %.300s, want 200 with the tool's error result", res.StatusCode, body)
	}
	for i := 2; i <= burst; i++ {
		if res, body := post(list, nil); res.StatusCode != http.StatusOK {
			t.Fatalf("request %d of %d allowed: %d %.300s (the tool call's own API calls were counted against the client)", i, burst, res.StatusCode, body)
		}
	}
	res, body := post(list, map[string]string{"X-Request-Id": "over-the-limit"})
	if res.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, `"code":"rate_limited"`) ||
		!strings.Contains(body, `"requestId":"over-the-limit"`) || res.Header.Get("Retry-After") == "" ||
		res.Header.Get("X-Request-Id") != "over-the-limit" {
		t.Errorf("request %d: %d, Retry-After %q, X-Request-Id %q, %.300s; want 429 rate_limited as JSON with the request's id",
			burst+1, res.StatusCode, res.Header.Get("Retry-After"), res.Header.Get("X-Request-Id"), body)
	}

	// The header cap is checked before the rate limit, as on the API.
	res, body = post(list, map[string]string{"X-Padding": strings.Repeat("a", httpapi.MaxHeaderBytes)})
	if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge || !strings.Contains(body, `"code":"headers_too_large"`) {
		t.Errorf("/mcp with a header over the cap: %d %.300s, want 431 headers_too_large as JSON", res.StatusCode, body)
	}
}
