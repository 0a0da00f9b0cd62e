package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pressly/goose/v3"
)

// TestMigration002KeepsAnsweredIdempotencyRecordsDropsBodies upgrades a v1
// database whose idempotency records hold response bodies (one with a run
// token in clear, the bug of issue "run tokens stored in plaintext"): the
// answered records survive as (resource kind, resource id), the in-flight
// reservation goes, and the token is no longer anywhere in the file.
func TestMigration002KeepsAnsweredIdempotencyRecordsDropsBodies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "clasp.db")
	const secret = "clasp_rt_0123456789abcdefSECRET"

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatalf("open v1: %v", err)
	}
	fsys, err := fs.Sub(migrations, "migration")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, fsys, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatalf("goose: %v", err)
	}
	if _, err := p.UpTo(ctx, 1); err != nil {
		t.Fatalf("migrate to v1: %v", err)
	}
	for _, r := range []struct {
		actor, key string
		status     int
		body       string
	}{
		{"board", "k-issue", 201, `{"id":"11111111-1111-4111-8111-111111111111","identifier":"ACME-1","title":"t"}`},
		{"agent-a", "k-run", 201, `{"id":"22222222-2222-4222-8222-222222222222","agentId":"a","attempt":1,"runToken":"` + secret + `"}`},
		{"agent-a", "k-comment", 201, `{"id":"33333333-3333-4333-8333-333333333333","issueId":"11111111-1111-4111-8111-111111111111","body":"b"}`},
		{"agent-a", "k-inflight", 0, ``},
	} {
		var body any
		if r.body != "" {
			body = []byte(r.body)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO idempotency_keys (actor_id, key, request_hash, status_code, body, created_at) VALUES (?, ?, 'h', ?, ?, 1)`,
			r.actor, r.key, r.status, body); err != nil {
			t.Fatalf("insert v1 record %s: %v", r.key, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	sDrv, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatalf("open (migrate to v2): %v", err)
	}
	s := newTestStore(sDrv)
	if v, err := s.SchemaVersion(ctx); err != nil || v != latestSchema {
		t.Errorf("SchemaVersion: got %d, %v, want %d", v, err, latestSchema)
	}
	rows, err := s.d.w.QueryContext(ctx, `SELECT actor_id || ' ' || key || ' ' || resource_type || ' ' || resource_id FROM idempotency_keys ORDER BY key`)
	if err != nil {
		t.Fatalf("read v2 records: %v", err)
	}
	var got []string
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	rows.Close()
	want := []string{
		"agent-a k-comment comment 33333333-3333-4333-8333-333333333333",
		"board k-issue issue 11111111-1111-4111-8111-111111111111",
		"agent-a k-run run 22222222-2222-4222-8222-222222222222",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("v2 records (-want +got):\n%s", diff)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	for _, f := range []string{path, path + "-wal", path + "-journal"} {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if bytes.Contains(data, []byte(secret)) {
			t.Errorf("%s still holds the run token of a v1 idempotency record", filepath.Base(f))
		}
	}
}

// TestMigration013ChecksWithoutINLists upgrades a v12 database with rows
// in it: no table definition keeps a CHECK with an IN list, the database
// passes integrity_check, the rows are as they were, and every rewritten
// constraint still refuses a value outside its list (on a fresh
// connection too, which reads the new definitions).
func TestMigration013ChecksWithoutINLists(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "clasp.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := fs.Sub(migrations, "migration")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, fsys, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatalf("goose: %v", err)
	}
	if _, err := p.UpTo(ctx, 12); err != nil {
		t.Fatalf("migrate to v12: %v", err)
	}
	for _, q := range []string{
		`INSERT INTO companies (id, name, issue_prefix, created_at) VALUES ('c', 'C', 'C', 1)`,
		`INSERT INTO agents (id, company_id, name, name_key, created_at) VALUES ('a', 'c', 'A', 'a', 1)`,
		`INSERT INTO runs (id, company_id, agent_id, status, created_at) VALUES ('r', 'c', 'a', 'running', 1)`,
		`INSERT INTO issues (id, company_id, identifier, title, status, priority, priority_rank, created_at, updated_at)
			VALUES ('i', 'c', 'C-1', 't', 'todo', 'high', 1, 1, 1)`,
		`INSERT INTO activity (company_id, actor_type, actor_id, action, entity_type, entity_id, created_at)
			VALUES ('c', 'board', 'board', 'issue.created', 'issue', 'i', 1)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("v12 row: %v", err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	sDrv, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatalf("open (migrate to v13): %v", err)
	}
	s := newTestStore(sDrv)
	defer s.Close()
	var n int
	if err := s.d.w.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND sql LIKE '%CHECK (% IN (%'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("tables with an IN-list CHECK after v13: %d, %v; want 0", n, err)
	}
	var check string
	if err := s.d.w.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Errorf("integrity_check: %q, %v", check, err)
	}
	var status, priority string
	if err := s.d.w.QueryRowContext(ctx, `SELECT status, priority FROM issues WHERE id = 'i'`).Scan(&status, &priority); err != nil ||
		status != "todo" || priority != "high" {
		t.Errorf("issue after v13: %q %q, %v", status, priority, err)
	}
	fresh, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	for _, db := range []*sql.DB{s.d.w, fresh} {
		for _, q := range []string{
			`UPDATE issues SET status = 'started' WHERE id = 'i'`,
			`UPDATE issues SET priority = 'urgent' WHERE id = 'i'`,
			`UPDATE runs SET status = 'done' WHERE id = 'r'`,
			`UPDATE agents SET status = 'gone' WHERE id = 'a'`,
			`INSERT INTO activity (company_id, actor_type, actor_id, action, entity_type, entity_id, created_at)
				VALUES ('c', 'robot', 'x', 'issue.created', 'issue', 'i', 1)`,
			`INSERT INTO wake_requests (id, company_id, agent_id, reason, status, created_at, updated_at)
				VALUES ('w', 'c', 'a', 'r', 'sleeping', 1, 1)`,
			`INSERT INTO idempotency_keys (actor_id, key, request_hash, resource_type, resource_id, created_at)
				VALUES ('a', 'k', 'h', 'agent', 'a', 1)`,
		} {
			if _, err := db.ExecContext(ctx, q); err == nil || !strings.Contains(err.Error(), "CHECK constraint failed") {
				t.Errorf("%s: got %v, want a CHECK constraint failure", q, err)
			}
		}
	}
	for _, q := range []string{
		`UPDATE issues SET status = 'in_review', priority = 'low' WHERE id = 'i'`,
		`UPDATE runs SET status = 'timed_out' WHERE id = 'r'`,
		`INSERT INTO activity (company_id, actor_type, actor_id, action, entity_type, entity_id, created_at)
			VALUES ('c', 'system', 'x', 'issue.created', 'issue', 'i', 1)`,
	} {
		if _, err := s.d.w.ExecContext(ctx, q); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
}
