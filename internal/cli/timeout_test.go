package cli

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// silentServer listens on loopback, takes every connection and never
// answers: a server that is stuck. It returns the URL and a channel that
// gets a value per connection taken; the connections close at the test's
// end.
func silentServer(t *testing.T) (url string, accepted <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	acc := make(chan struct{}, 64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // held open, never answered
			mu.Unlock()
			select {
			case acc <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String(), acc
}

// TestResponseTimeout: a server that takes the connection but never
// answers fails a client command after --response-timeout with an error
// that says so, instead of hanging it; a negative timeout is a usage error.
func TestResponseTimeout(t *testing.T) {
	t.Parallel()
	url, _ := silentServer(t)
	env := map[string]string{EnvURL: url, EnvToken: "clasp_ak_x"}
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

// TestEventsSayWhenTheStreamIsDown: clasp events keeps reconnecting to a
// server that does not answer (a follower waits for the server to come
// back), and says so on stderr once, not silently and not at every try;
// stopped, it exits 130.
func TestEventsSayWhenTheStreamIsDown(t *testing.T) {
	t.Parallel()
	url, accepted := silentServer(t)
	env := map[string]string{EnvURL: url, EnvToken: "clasp_ak_x"}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var out, errb bytes.Buffer
	go func() {
		done <- run(ctx, []string{"events", "--company", "00000000-0000-4000-8000-000000000001", "--response-timeout", "100ms"},
			strings.NewReader(""), &out, &errb, func(k string) string { return env[k] })
	}()
	for range 3 { // three tries: the first failed, it reconnected twice
		select {
		case <-accepted:
		case <-time.After(30 * time.Second):
			t.Fatal("clasp events did not connect again within 30 s")
		}
	}
	cancel()
	if code := <-done; code != ExitInterrupted {
		t.Errorf("exit %d, want %d (interrupted)", code, ExitInterrupted)
	}
	if n := strings.Count(errb.String(), "the stream broke"); n != 1 || !strings.Contains(errb.String(), "reconnecting until the server answers") {
		t.Errorf("stderr says the stream broke %d times, want once:\n%s", n, errb.String())
	}
}
