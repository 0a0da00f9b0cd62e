package dbfile

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
	"github.com/clasp-dev/clasp/internal/store/sqlite"
)

// TestSnapshotDuringWrites copies a store while 4 goroutines create issues
// on it: the copy passes Inspect, has no -wal beside it, and holds every
// issue created before the snapshot began (and nothing half-written:
// issues and their activity rows are counted together).
func TestSnapshotDuringWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "clasp.db")
	sDrv, err := sqlite.Open(ctx, src, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := store.New(sDrv)
	defer s.Close()
	co, err := s.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "Acme", IssuePrefix: "ACME", Actor: board})
	if err != nil {
		t.Fatal(err)
	}
	create := func(title string) {
		if _, err := s.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: co.ID, Title: title, Actor: board}); err != nil {
			t.Error(err)
		}
	}
	for i := range 50 {
		create(fmt.Sprintf("before %d", i))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				create(fmt.Sprintf("during %d/%d", w, n))
			}
		})
	}
	dst := filepath.Join(dir, "backup.db")
	v, err := Snapshot(ctx, src, dst)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if v != sqlite.LatestSchemaVersion() {
		t.Errorf("snapshot schema version %d, want %d", v, sqlite.LatestSchemaVersion())
	}
	if st, err := os.Stat(dst); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("snapshot file mode: %v (%v), want 0600: it holds every issue and key hash", st.Mode().Perm(), err)
	}
	if _, err := os.Stat(dst + "-wal"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a -wal file is beside the snapshot (%v): it is not self-contained", err)
	}
	in, err := Inspect(ctx, dst)
	if err != nil {
		t.Fatalf("inspect the snapshot: %v", err)
	}
	if in.Issues < 50 || in.Companies != 1 || in.Activity < in.Issues {
		t.Errorf("snapshot holds %+v; want the company, at least the 50 issues made before it, and an activity row for each issue", in)
	}
	if _, err := Snapshot(ctx, src, dst); err == nil {
		t.Error("a second snapshot onto the same file succeeded; want a refusal")
	}
}

// TestInspectRefuses: a file that is not SQLite, a SQLite file without
// clasp's schema, a newer schema, a broken L7 and a dangling foreign key
// are each refused with an error naming the check; an older schema passes
// and Open then migrates it.
func TestInspectRefuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	fresh := func(name string) string {
		path := filepath.Join(dir, name)
		sDrv, err := sqlite.Open(ctx, path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s := store.New(sDrv)
		co, err := s.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "Acme", IssuePrefix: "ACME", Actor: board})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: co.ID, Title: "t", Actor: board}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return path
	}
	exec := func(path string, stmts ...string) {
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for _, q := range stmts {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}

	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a database ", 500)), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.db")
	exec(other, "CREATE TABLE t (x)")
	newer := fresh("newer.db")
	exec(newer, fmt.Sprintf("INSERT INTO goose_db_version (version_id, is_applied) VALUES (%d, 1)", sqlite.LatestSchemaVersion()+1))
	l7 := fresh("l7.db")
	exec(l7, "PRAGMA ignore_check_constraints = ON",
		"UPDATE issues SET checkout_run_id = 'r1', execution_run_id = 'r2', status = 'todo'")
	fk := fresh("fk.db")
	exec(fk, "PRAGMA foreign_keys = OFF", "UPDATE issues SET company_id = 'gone'")
	for _, c := range []struct{ path, want string }{
		{garbage, "not a readable SQLite database"},
		{other, "not a clasp database"},
		{newer, "newer clasp"},
		{l7, "L7"},
		{fk, "foreign key check failed"},
		{filepath.Join(dir, "missing.db"), "no such file"},
	} {
		_, err := Inspect(ctx, c.path)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Inspect(%s) = %v; want an error containing %q", filepath.Base(c.path), err, c.want)
		}
	}
	if _, err := Inspect(ctx, newer); !errors.Is(err, ErrNewerSchema) {
		t.Errorf("Inspect of a newer schema: %v; want ErrNewerSchema", err)
	}

	// An older schema passes, and Open migrates it.
	old := filepath.Join(dir, "old.db")
	db, err := sql.Open("sqlite", old)
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, sqlite.Migrations(), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	in, err := Inspect(ctx, old)
	if err != nil || in.SchemaVersion != 3 {
		t.Fatalf("Inspect of a version 3 database: %+v, %v; want it accepted at version 3", in, err)
	}
	sDrv, err := sqlite.Open(ctx, old, sqlite.Options{})
	if err != nil {
		t.Fatalf("open the older database: %v", err)
	}
	s := store.New(sDrv)
	defer s.Close()
	if v, err := s.SchemaVersion(ctx); err != nil || v != sqlite.LatestSchemaVersion() {
		t.Errorf("after Open: schema version %d, %v; want %d", v, err, sqlite.LatestSchemaVersion())
	}
}

// TestDetachInUse: while a store has the database open, Detach fails with
// ErrInUse and the database stays in WAL mode and keeps serving; once the
// store is closed Detach leaves a single file holding every write.
func TestDetachInUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "clasp.db")
	sDrv, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := store.New(sDrv)
	if _, err := s.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "Acme", IssuePrefix: "ACME", Actor: board}); err != nil {
		t.Fatal(err)
	}
	if err := Detach(ctx, path); !errors.Is(err, ErrInUse) {
		t.Errorf("Detach while a store has the database open: %v; want ErrInUse", err)
	}
	if _, err := s.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "Beta", IssuePrefix: "BETA", Actor: board}); err != nil {
		t.Errorf("write after the refused Detach: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := Detach(ctx, path); err != nil {
		t.Fatalf("Detach of a closed database: %v", err)
	}
	if _, err := os.Stat(path + "-wal"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("-wal still there after Detach: %v", err)
	}
	in, err := Inspect(ctx, path)
	if err != nil || in.Companies != 2 {
		t.Errorf("after Detach: %+v, %v; want both companies in the file", in, err)
	}
}

var board = store.Actor{Type: clasp.ActorBoard}
