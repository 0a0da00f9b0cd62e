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
	if _, err := s.pool.Exec(ctx, `INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1, true)`, latest+1); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(ctx, testURL(t), Options{Schema: s.schema, MaxConns: 2})
	if err == nil {
		s2.Close()
		t.Fatalf("Open of a schema at version %d (this binary knows %d) succeeded", latest+1, latest)
	}
	if !errors.Is(err, store.ErrNewerSchema) {
		t.Fatalf("Open: %v, want store.ErrNewerSchema", err)
	}
	t.Logf("refused: %v", err)
}
