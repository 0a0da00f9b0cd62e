package securitytest

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
)

// TestHSTSAndAEADOnlyOverTLS: every answer over TLS (the API, the board's
// pages, /healthz, /mcp) carries Strict-Transport-Security, and a TLS 1.2
// client that offers only CBC suites with SHA-1 gets no handshake, while
// one offering an ECDHE AEAD suite is served.
func TestHSTSAndAEADOnlyOverTLS(t *testing.T) {
	p := newPKI(t)
	s := startServer(t, serveOpts{Args: []string{"--tls-cert", p.ServerCert, "--tls-key", p.ServerKey}})
	hc := p.httpsClient(false, 0)
	for _, path := range []string{"/api/companies", "/", "/login", "/healthz", "/mcp"} {
		req, _ := http.NewRequest("GET", s.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+s.BoardToken)
		res, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if got := res.Header.Get("Strict-Transport-Security"); !strings.HasPrefix(got, "max-age=") {
			t.Errorf("GET %s over TLS (%d): Strict-Transport-Security %q, want max-age=...", path, res.StatusCode, got)
		}
	}

	host := strings.TrimPrefix(s.URL, "https://")
	dial := func(suites []uint16) error {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", host, &tls.Config{
			RootCAs: p.pool, MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12, CipherSuites: suites})
		if err == nil {
			c.Close()
		}
		return err
	}
	// The server's certificate is ECDSA: these are the suites it could pick.
	for _, cbc := range []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA} {
		if err := dial([]uint16{cbc}); err == nil {
			t.Errorf("TLS 1.2 handshake with only %s succeeded, want it refused", tls.CipherSuiteName(cbc))
		}
	}
	if err := dial([]uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}); err != nil {
		t.Errorf("TLS 1.2 handshake with ECDHE-ECDSA-AES128-GCM-SHA256: %v, want it served", err)
	}
}

// TestHSTSBehindTrustedProxy: a request from a trusted proxy saying
// X-Forwarded-Proto: https is answered with Strict-Transport-Security;
// the same header from an untrusted peer, or plain HTTP without it, is
// not (a browser ignores HSTS over plain HTTP, and an untrusted client
// must not decide what the server says of itself).
func TestHSTSBehindTrustedProxy(t *testing.T) {
	s := startServer(t, serveOpts{Args: []string{"--trusted-proxy", "127.0.0.1"}})
	get := func(proto string) string {
		req, _ := http.NewRequest("GET", s.URL+"/healthz", nil)
		if proto != "" {
			req.Header.Set("X-Forwarded-Proto", proto)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.Header.Get("Strict-Transport-Security")
	}
	if got := get("https"); got == "" {
		t.Errorf("trusted proxy with X-Forwarded-Proto: https: no Strict-Transport-Security")
	}
	if got := get(""); got != "" {
		t.Errorf("plain HTTP: Strict-Transport-Security %q, want none", got)
	}
	untrusted := startServer(t, serveOpts{})
	req, _ := http.NewRequest("GET", untrusted.URL+"/healthz", nil)
	req.Header.Set("X-Forwarded-Proto", "https")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got := res.Header.Get("Strict-Transport-Security"); got != "" {
		t.Errorf("X-Forwarded-Proto from a peer that is no trusted proxy: Strict-Transport-Security %q, want none", got)
	}
}

// metricsSize is the size in bytes of s's /metrics page.
func metricsSize(t *testing.T, s *server) int {
	t.Helper()
	req, _ := http.NewRequest("GET", s.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+s.BoardToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d, %v", res.StatusCode, err)
	}
	return len(b)
}

// TestMetricsLabelsBounded: 10,000 unauthenticated requests, each with a
// method name of its own and 200 bytes long, pipelined on a few
// connections, leave /metrics within a few KB of its size before (every
// unknown method is one label value, OTHER; the routes are the mux's
// patterns), where each name used to become a new series.
func TestMetricsLabelsBounded(t *testing.T) {
	s := startServer(t, serveOpts{})
	// A first round makes the series of these answers exist (429s among
	// them when the address's burst runs out), so that the second round
	// is measured against them.
	pipelineMethods(t, s, "warm", 100)
	before := metricsSize(t, s)
	pipelineMethods(t, s, "probe", 10000)
	after := metricsSize(t, s)
	if after-before > 4096 {
		t.Errorf("/metrics grew from %d to %d bytes after 10,000 requests with distinct method names, want at most 4 KB more", before, after)
	}
}

// pipelineMethods sends n requests, each with a distinct made-up method
// (tag and its number, padded to 200 bytes), to /api/companies on 4
// connections, pipelined, and reads every answer.
func pipelineMethods(t *testing.T, s *server, tag string, n int) {
	t.Helper()
	host := strings.TrimPrefix(s.URL, "http://")
	const conns = 4
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for c := 0; c < conns; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			conn, err := net.DialTimeout("tcp", host, 10*time.Second)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(2 * time.Minute))
			count := 0
			for i := c; i < n; i += conns {
				count++
			}
			go func() {
				w := bufio.NewWriter(conn)
				for i := c; i < n; i += conns {
					m := fmt.Sprintf("%s%06d", strings.ToUpper(tag), i)
					m += strings.Repeat("X", 200-len(m))
					fmt.Fprintf(w, "%s /api/companies HTTP/1.1\r\nHost: %s\r\n\r\n", m, host)
				}
				_ = w.Flush()
			}()
			r := bufio.NewReader(conn)
			for i := 0; i < count; i++ {
				res, err := http.ReadResponse(r, nil)
				if err != nil {
					errs <- fmt.Errorf("answer %d of connection %d: %w", i, c, err)
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusMethodNotAllowed && res.StatusCode != http.StatusTooManyRequests {
					errs <- fmt.Errorf("made-up method answered %d, want 405 (or 429)", res.StatusCode)
					return
				}
			}
		}(c)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestSlowBodyCutOnEveryRoute: a body announced as 1,000 bytes and sent
// one byte a second is cut at --body-timeout on the API (with the board
// token: without one the API answers 401 before reading), and with no
// credential on /mcp and on the board's /login alike: 408
// request_timeout as a JSON error.
func TestSlowBodyCutOnEveryRoute(t *testing.T) {
	s := startServer(t, serveOpts{Args: []string{"--body-timeout", "2s"}})
	host := strings.TrimPrefix(s.URL, "http://")
	routes := []struct{ path, ctype, authz string }{
		{"/api/companies", "application/json", "Authorization: Bearer " + s.BoardToken + "\r\n"},
		{"/mcp", "application/json", ""},
		{"/login", "application/x-www-form-urlencoded", ""},
	}
	var wg sync.WaitGroup
	for _, rt := range routes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := net.DialTimeout("tcp", host, 10*time.Second)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			start := time.Now()
			_ = conn.SetDeadline(start.Add(30 * time.Second))
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\n%sContent-Type: %s\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n", rt.path, host, rt.authz, rt.ctype)
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				tick := time.NewTicker(time.Second)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
						if _, err := conn.Write([]byte("x")); err != nil {
							return
						}
					}
				}
			}()
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Errorf("POST %s with a slow body: no answer after %s: %v", rt.path, time.Since(start).Round(time.Millisecond), err)
				return
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			var e clasp.Error
			if res.StatusCode != http.StatusRequestTimeout || json.Unmarshal(b, &e) != nil || e.Code != clasp.CodeRequestTimeout {
				t.Errorf("POST %s with a slow body: %d %s after %s, want 408 request_timeout", rt.path, res.StatusCode, b, time.Since(start).Round(time.Millisecond))
			}
			if d := time.Since(start); d > 15*time.Second {
				t.Errorf("POST %s with a slow body: answered after %s, want about the 2 s body timeout", rt.path, d)
			}
		}()
	}
	wg.Wait()
}
