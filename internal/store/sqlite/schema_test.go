package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/clasp-dev/clasp/internal/store"
)

// TestOpenRefusesNewerSchema: a database a newer clasp upgraded (its
// schema version above this binary's newest migration) is refused at
// open with store.ErrNewerSchema and left as it is, not served.
func TestOpenRefusesNewerSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "clasp.db")
	sDrv, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := newTestStore(sDrv)
	latest, err := s.SchemaVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.d.w.ExecContext(ctx, `INSERT INTO goose_db_version (version_id, is_applied) VALUES (?, 1)`, latest+1); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(ctx, path, Options{})
	if err == nil {
		s2.Close()
		t.Fatalf("Open of a database at schema version %d (this binary knows %d) succeeded", latest+1, latest)
	}
	if !errors.Is(err, store.ErrNewerSchema) {
		t.Fatalf("Open: %v, want store.ErrNewerSchema", err)
	}
	t.Logf("refused: %v", err)
}
