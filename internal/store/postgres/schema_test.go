package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/clasp-dev/clasp/internal/store"
)

// TestOpenRefusesNewerSchema: a schema a newer clasp upgraded (its version
// above this binary's newest migration) is refused at open with
// store.ErrNewerSchema, not served.
func TestOpenRefusesNewerSchema(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	latest, err := s.SchemaVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.d.pool.Exec(ctx, `INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1, true)`, latest+1); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(ctx, testURL(t), Options{Schema: s.d.schema, MaxConns: 2})
	if err == nil {
		s2.Close()
		t.Fatalf("Open of a schema at version %d (this binary knows %d) succeeded", latest+1, latest)
	}
	if !errors.Is(err, store.ErrNewerSchema) {
		t.Fatalf("Open: %v, want store.ErrNewerSchema", err)
	}
	t.Logf("refused: %v", err)
}

// TestIssuesAutovacuumSettings: the issues table carries the autovacuum
// settings of migration 012 (a claim drain's dead index entries are
// vacuumed after 1,000 dead rows plus 1 %, and always from the indexes).
func TestIssuesAutovacuumSettings(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	var opts []string
	if err := s.d.pool.QueryRow(ctx, `SELECT coalesce(c.reloptions, '{}') FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = 'issues'`, s.d.schema).Scan(&opts); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"autovacuum_vacuum_scale_factor=0.01": true, "autovacuum_vacuum_threshold=1000": true, "vacuum_index_cleanup=on": true}
	for _, o := range opts {
		delete(want, o)
	}
	if len(want) != 0 {
		t.Errorf("issues reloptions %v, missing %v", opts, want)
	}
}
