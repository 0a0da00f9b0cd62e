package verify_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/clasp-dev/clasp/internal/httpapi"
	"github.com/clasp-dev/clasp/internal/store"
	"github.com/clasp-dev/clasp/internal/store/sqlite"
	"github.com/clasp-dev/clasp/internal/verify"
	"github.com/prometheus/client_golang/prometheus"
)

// startServer serves the real handler over a fresh SQLite file on a
// loopback listener, with a board token.
func startServer(t *testing.T) (url, board string) {
	t.Helper()
	ctx := context.Background()
	stDrv, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "clasp.db"), sqlite.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	st := store.New(stDrv)
	board, hash := httpapi.NewToken(httpapi.TokenBoard)
	if _, err := st.SettingPutIfAbsent(ctx, "board_token_hash", hash); err != nil {
		t.Fatalf("board token: %v", err)
	}
	srv := httpapi.New(httpapi.Config{
		Store:    st,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		LeaseTTL: 10 * time.Minute, // the model has runs end only when finished
		Registry: prometheus.NewRegistry(),
	})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ts.Close()
		st.Close()
	})
	return ts.URL, board
}

// TestVerifyDepsFindsNoViolation runs the checker's clients with
// dependencies: every contended issue is blocked by an issue the clients
// reopen and resolve, so checkouts race the readiness rules; every
// per-issue history must be linearizable, and some checkouts must have
// been refused blocked_by_unresolved (or the rule was never exercised).
func TestVerifyDepsFindsNoViolation(t *testing.T) {
	url, board := startServer(t)
	rep, err := verify.Run(context.Background(), verify.Config{
		ServerURL: url, BoardToken: board, Deps: true,
		Duration: 3 * time.Second, Clients: 6, Issues: 2, Seed: 11, Out: t.TempDir(),
	})
	if err != nil {
		t.Fatalf("verify: %v (report %+v)", err, rep)
	}
	if rep.Refused["blocked_by_unresolved"] == 0 {
		t.Errorf("no checkout was refused blocked_by_unresolved: the readiness rule was not exercised (refusals %v)", rep.Refused)
	}
}

// TestVerifyFindsNoViolation runs the checker's clients against a real
// server for a few seconds: every per-issue history must be linearizable.
func TestVerifyFindsNoViolation(t *testing.T) {
	url, board := startServer(t)
	out := t.TempDir()
	rep, err := verify.Run(context.Background(), verify.Config{
		ServerURL: url, BoardToken: board,
		Duration: 3 * time.Second, Clients: 6, Issues: 3, Seed: 7, Out: out,
	})
	if err != nil {
		t.Fatalf("verify: %v (report %+v)", err, rep)
	}
	t.Logf("report: %+v", rep)
	if rep.Violations != 0 || rep.Undecided != 0 || rep.L7Broken != 0 || rep.ServerErrors != 0 {
		t.Errorf("report %+v: want no violation, undecided history, L7 break or 5xx", rep)
	}
	if rep.ByKind[verify.OpCheckout] == 0 || rep.ByKind[verify.OpFinish] == 0 || rep.ByKind[verify.OpRelease] == 0 {
		t.Errorf("operations %v: want checkouts, releases and finishes", rep.ByKind)
	}
}

const (
	issue = "00000000-0000-0000-0000-0000000000i1"
	runA  = "00000000-0000-0000-0000-0000000000a1"
	runB  = "00000000-0000-0000-0000-0000000000b1"
	agA   = "00000000-0000-0000-0000-00000000000a"
	agB   = "00000000-0000-0000-0000-00000000000b"
)

func checkout(client int, run, agent string, call, ret int64, epoch int64) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Call: call, Return: ret,
		Input:  verify.Input{Kind: verify.OpCheckout, Issue: issue, Run: run, Agent: agent},
		Output: verify.Output{OK: true, Issue: &verify.Lock{Status: "in_progress", Assignee: agent, Holder: run, Epoch: epoch, L7: true}},
	}
}

// TestCheckCatchesDoubleCheckout feeds the checker two overlapping
// successful checkouts of one issue by live runs of different agents with
// the same epoch: no order of them obeys rule L1, so it must be caught and
// the history and its picture written.
func TestCheckCatchesDoubleCheckout(t *testing.T) {
	dir := t.TempDir()
	h := []porcupine.Operation{
		checkout(0, runA, agA, 10, 40, 1),
		checkout(1, runB, agB, 20, 50, 1),
	}
	res, files, err := verify.Check(h, dir, time.Minute)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	if res != porcupine.Illegal {
		t.Fatalf("result %s, want Illegal", res)
	}
	if len(files) != 2 {
		t.Fatalf("files %v, want the history and its picture", files)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil || len(data) == 0 {
			t.Errorf("%s: %v, %d bytes", f, err, len(data))
		}
	}
	if !strings.HasSuffix(files[1], ".html") {
		t.Errorf("picture %s is not .html", files[1])
	}
}

// TestCheckAcceptsHandOver is the control: the same two checkouts with a
// release between them (epochs 1, then 2) are linearizable; and an unknown
// outcome (a lost answer) may or may not have happened.
func TestCheckAcceptsHandOver(t *testing.T) {
	release := porcupine.Operation{ClientId: 0, Call: 41, Return: 45,
		Input:  verify.Input{Kind: verify.OpRelease, Issue: issue, Run: runA, Agent: agA, Unassign: true},
		Output: verify.Output{OK: true, Issue: &verify.Lock{Status: "todo", Epoch: 1, L7: true}},
	}
	lost := porcupine.Operation{ClientId: 2, Call: 46, Return: 1 << 62,
		Input:  verify.Input{Kind: verify.OpCheckout, Issue: issue, Run: runA, Agent: agA},
		Output: verify.Output{Unknown: true},
	}
	h := []porcupine.Operation{checkout(0, runA, agA, 10, 40, 1), release, lost, checkout(1, runB, agB, 50, 60, 2)}
	res, _, err := verify.Check(h, t.TempDir(), time.Minute)
	if err != nil || res != porcupine.Ok {
		t.Fatalf("result %s, %v; want Ok", res, err)
	}
}
