package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestRequestDeadlineOnPostgres: a checkout blocked on its issue's row
// (another session holds it FOR UPDATE) past the server's request deadline
// answers 503 unavailable with details.deadlineExceeded (not 500, not a
// 200 later), its statement is gone from the database (statement_timeout),
// and once the row is free the issue is still todo: the cut call took no
// effect after its answer.
func TestRequestDeadlineOnPostgres(t *testing.T) {
	u := testDatabase(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan ServeInfo, 1)
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ServeConfig{DataDir: t.TempDir(), DatabaseURL: u.String(), Listen: "127.0.0.1:0", RequestDeadline: 3 * time.Second}, ready)
	}()
	var info ServeInfo
	select {
	case info = <-ready:
	case err := <-done:
		t.Fatalf("Serve: %v", err)
	}
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	call := func(method, path, token, run string, body any) (int, map[string]any) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, err := http.NewRequest(method, info.URL+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if run != "" {
			req.Header.Set("X-Clasp-Run-Id", run)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var v map[string]any
		_ = json.NewDecoder(res.Body).Decode(&v)
		return res.StatusCode, v
	}
	board := info.BoardToken
	_, co := call("POST", "/api/companies", board, "", map[string]any{"name": "deadline", "issuePrefix": "DL"})
	_, ag := call("POST", fmt.Sprintf("/api/companies/%s/agents", co["id"]), board, "", map[string]any{"name": "a"})
	_, key := call("POST", fmt.Sprintf("/api/agents/%s/keys", ag["id"]), board, "", map[string]any{})
	_, iss := call("POST", fmt.Sprintf("/api/companies/%s/issues", co["id"]), board, "", map[string]any{"title": "t", "status": "todo"})
	agentTok, _ := key["token"].(string)
	_, run := call("POST", "/api/agents/me/runs", agentTok, "", map[string]any{})
	runID, _ := run["id"].(string)
	issueID, _ := iss["id"].(string)
	if runID == "" || issueID == "" {
		t.Fatalf("setup: run %v issue %v", run, iss)
	}

	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM issues WHERE id = $1 FOR UPDATE`, issueID); err != nil {
		t.Fatal(err)
	}
	st, body := call("POST", "/api/issues/"+issueID+"/checkout", agentTok, runID, map[string]any{"agentId": ag["id"], "expectedStatuses": []string{"todo"}})
	details, _ := body["details"].(map[string]any)
	if st != http.StatusServiceUnavailable || body["code"] != "unavailable" || details["deadlineExceeded"] != true {
		t.Fatalf("checkout blocked past the deadline: %d %v, want 503 unavailable with deadlineExceeded", st, body)
	}
	// The blocked statement ends on the database too (statement_timeout).
	other, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	for {
		var waiting int
		if err := other.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	st, got := call("GET", "/api/issues/"+issueID, board, "", nil)
	if st != http.StatusOK || got["status"] != "todo" || got["checkoutRunId"] != nil {
		t.Fatalf("issue after the cut checkout: %d %v, want it todo and unlocked", st, got)
	}
}
