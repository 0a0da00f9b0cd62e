package cli

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestServePprof: --pprof serves /debug/pprof/ on its own loopback
// listener, not on the API's.
func TestServePprof(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan ServeInfo, 1)
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ServeConfig{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Pprof: "127.0.0.1:0"}, ready)
	}()
	var info ServeInfo
	select {
	case info = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("Serve: %v", err)
	}
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve after shutdown: %v", err)
		}
	}()
	if info.PprofAddr == "" || info.PprofAddr == info.Addr {
		t.Fatalf("PprofAddr %q (API %q): want a listener of its own", info.PprofAddr, info.Addr)
	}
	get := func(url string) (int, string) {
		res, err := http.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if st, body := get("http://" + info.PprofAddr + "/debug/pprof/"); st != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("pprof index: status %d, body %.100q; want 200 listing the profiles", st, body)
	}
	if st, _ := get("http://" + info.Addr + "/debug/pprof/"); st == http.StatusOK {
		t.Errorf("the API listener serves /debug/pprof/ (status %d); want it only on --pprof's", st)
	}
}

// TestServePprofLoopbackOnly: a non-loopback --pprof is a usage error
// before anything is bound.
func TestServePprofLoopbackOnly(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"0.0.0.0:6060", ":6060", "192.0.2.1:6060", "example.com:6060", "6060"} {
		err := Serve(context.Background(), ServeConfig{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Pprof: addr}, nil)
		var ue *usageError
		if err == nil || !errors.As(err, &ue) {
			t.Errorf("--pprof %q: got %v, want a usage error", addr, err)
		}
	}
}
