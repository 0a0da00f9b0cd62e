package cli

import (
	"net"
	"strings"
	"testing"
	"time"
)

// TestResponseTimeout: a server that takes the connection but never
// answers fails a client command after --response-timeout with an error
// that says so, instead of hanging it; a negative timeout is a usage error.
func TestResponseTimeout(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conns := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns <- c // held open, never answered
		}
	}()
	defer func() {
		for {
			select {
			case c := <-conns:
				c.Close()
			default:
				return
			}
		}
	}()
	env := map[string]string{EnvURL: "http://" + ln.Addr().String(), EnvToken: "clasp_ak_x"}
	start := time.Now()
	r := runCLI(t, env, "", "issue", "show", "00000000-0000-4000-8000-000000000001", "--response-timeout", "300ms")
	if r.code != ExitError || !strings.Contains(r.stderr, "did not begin its answer within 300ms (--response-timeout)") {
		t.Errorf("exit %d after %s, stderr:\n%s\nwant exit 1 saying the server did not answer within 300ms", r.code, time.Since(start), r.stderr)
	}
	r = runCLI(t, env, "", "issue", "show", "ACME-1", "--response-timeout", "-1s")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "--response-timeout -1s is negative") {
		t.Errorf("negative timeout: exit %d, stderr:\n%s\nwant a usage error", r.code, r.stderr)
	}
}
