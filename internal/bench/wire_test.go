package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/clasp-dev/clasp/internal/httpapi"
)

// TestAppendRequestIsNetHTTPs: the request a wire writes is, byte for
// byte, what net/http's client writes for api.do's request.
func TestAppendRequestIsNetHTTPs(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		method, path, token, run string
		body                     []byte
	}{
		{"POST", "/api/issues/x/checkout", "key1", "run1", []byte(`{"agentId":"a"}`)},
		{"POST", "/api/issues/x/release", "key1", "", []byte(`{}`)},
		{"GET", "/api/issues/x", "key1", "run1", nil},
		{"POST", "/api/x", "", "", []byte{}},
	} {
		var rd io.Reader
		if c.body != nil {
			rd = bytes.NewReader(c.body)
		}
		req, err := http.NewRequest(c.method, "http://127.0.0.1:8080"+c.path, rd)
		if err != nil {
			t.Fatal(err)
		}
		if c.token != "" {
			req.Header["Authorization"] = []string{"Bearer " + c.token}
		}
		if c.run != "" {
			req.Header[httpapi.RunIDHeader] = []string{c.run}
		}
		if c.body != nil {
			req.Header["Content-Type"] = []string{"application/json"}
		}
		var want bytes.Buffer
		if err := req.Write(&want); err != nil {
			t.Fatal(err)
		}
		got := appendRequest(nil, c.method, c.path, "127.0.0.1:8080", c.token, c.run, c.body)
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%s %s:\n got %q\nwant %q", c.method, c.path, got, want.Bytes())
		}
	}
}

// TestWire: answers read whole, bodies kept when asked or not 2xx, the
// connection kept alive, and a new one after the server closes it (by
// Connection: close, or idle between two requests).
func TestWire(t *testing.T) {
	t.Parallel()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch {
		case r.Header.Get("Authorization") != "Bearer k":
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"no"}`))
		case strings.HasSuffix(r.URL.Path, "/close"):
			w.Header().Set("Connection", "close")
			_, _ = w.Write(b)
		case strings.HasSuffix(r.URL.Path, "/big"):
			_, _ = w.Write(bytes.Repeat([]byte("x"), 100000)) // chunked
		default:
			_, _ = w.Write(append([]byte(r.Header.Get(httpapi.RunIDHeader)+":"), b...))
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	w := newWire(context.Background(), &api{hc: newHTTPClient(1), base: srv.URL})
	defer w.close()
	check := func(path, token string, keep bool, wantStatus int, wantBody string, wantConns int64) {
		t.Helper()
		st, b, err := w.do("POST", path, token, "r1", []byte(`{"a":1}`), keep)
		if err != nil || st != wantStatus || string(b) != wantBody || conns.Load() != wantConns {
			t.Fatalf("%s: got %d %q %v, %d connections; want %d %q, %d connections", path, st, b, err, conns.Load(), wantStatus, wantBody, wantConns)
		}
	}
	check("/a", "k", true, 200, `r1:{"a":1}`, 1)
	check("/a", "k", false, 200, ``, 1)
	check("/a", "bad", false, 401, `{"error":"no"}`, 1)
	check("/big", "k", false, 200, ``, 1)
	check("/close", "k", true, 200, `{"a":1}`, 1)
	check("/a", "k", true, 200, `r1:{"a":1}`, 2)
	srv.CloseClientConnections()
	check("/a", "k", true, 200, `r1:{"a":1}`, 3)
}

// TestWireEndsWithContext: a request waiting for its answer ends when
// the wire's context is done.
func TestWireEndsWithContext(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = http.ReadRequest(bufio.NewReader(c)) // and never answers
		_, _ = io.Copy(io.Discard, c)
	}()
	ctx, cancel := context.WithCancel(context.Background())
	w := newWire(ctx, &api{base: "http://" + ln.Addr().String()})
	defer w.close()
	done := make(chan error, 1)
	go func() {
		_, _, err := w.do("GET", "/", "k", "", nil, false)
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}
