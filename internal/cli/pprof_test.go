package cli

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// TestServePprof: --pprof serves /debug/pprof/ on its own loopback
// listener, not on the API's, to admin operator tokens of every company
// only: without a token, with an unknown one, a viewer's or an admin's
// scoped to one company, it answers a JSON error (401, 401, 403, 403) and
// shows nothing, not even the command line.
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
	get := func(url, token string) (int, string) {
		req, err := http.NewRequest("GET", url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if st, body := get("http://"+info.PprofAddr+"/debug/pprof/", info.BoardToken); st != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("pprof index with the board token: status %d, body %.100q; want 200 listing the profiles", st, body)
	}
	if st, _ := get("http://"+info.Addr+"/debug/pprof/", info.BoardToken); st == http.StatusOK {
		t.Errorf("the API listener serves /debug/pprof/ (status %d); want it only on --pprof's", st)
	}
	board := client.New(info.URL, client.WithToken(info.BoardToken))
	viewer, err := board.OperatorTokenCreate(ctx, client.OperatorTokenCreateRequest{Name: "v", Role: clasp.RoleViewer})
	if err != nil {
		t.Fatal(err)
	}
	// An admin of one company: the profiler shows the whole process,
	// every company's work in it.
	co, err := board.CompanyCreate(ctx, client.CompanyCreateRequest{Name: "Profiled", IssuePrefix: "PRF"})
	if err != nil {
		t.Fatal(err)
	}
	scoped, err := board.OperatorTokenCreate(ctx, client.OperatorTokenCreateRequest{Name: "a", Role: clasp.RoleAdmin, CompanyID: &co.ID})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, token string
		status      int
		code        string
	}{
		{"no token", "", http.StatusUnauthorized, "unauthenticated"},
		{"unknown token", "clasp_ot_nope", http.StatusUnauthorized, "unauthenticated"},
		{"viewer token", viewer.Token, http.StatusForbidden, "forbidden"},
		{"company-scoped admin token", scoped.Token, http.StatusForbidden, "forbidden"},
	} {
		for _, p := range []string{"/debug/pprof/", "/debug/pprof/cmdline"} {
			st, body := get("http://"+info.PprofAddr+p, tc.token)
			if st != tc.status || !strings.Contains(body, `"code":"`+tc.code+`"`) || strings.Contains(body, "goroutine") || strings.Contains(body, "127.0.0.1") {
				t.Errorf("%s %s: status %d body %.120q; want %d %s and nothing of the profiler", tc.name, p, st, body, tc.status, tc.code)
			}
		}
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
