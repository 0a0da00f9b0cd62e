package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"io/fs"
	"os"
	"path/filepath"
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

	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatalf("open (migrate to v2): %v", err)
	}
	if v, err := s.SchemaVersion(ctx); err != nil || v != latestSchema {
		t.Errorf("SchemaVersion: got %d, %v, want %d", v, err, latestSchema)
	}
	rows, err := s.w.QueryContext(ctx, `SELECT actor_id || ' ' || key || ' ' || resource_type || ' ' || resource_id FROM idempotency_keys ORDER BY key`)
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
