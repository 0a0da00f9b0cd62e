package cli

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/dbfile"
	"github.com/clasp-dev/clasp/internal/store"
	"github.com/clasp-dev/clasp/internal/store/sqlite"
)

// newDataDir makes a data directory whose database holds the named
// companies.
func newDataDir(t *testing.T, companies ...string) string {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	sDrv, err := sqlite.Open(ctx, filepath.Join(dir, DBFileName), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := store.New(sDrv)
	for _, name := range companies {
		if _, err := s.CompanyCreate(ctx, &store.CompanyCreateParams{Name: name, IssuePrefix: strings.ToUpper(name), Actor: store.Actor{Type: clasp.ActorBoard}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// companiesIn inspects the database of a data directory.
func companiesIn(t *testing.T, dir string) int64 {
	t.Helper()
	// Inspect a copy: it switches its file out of WAL mode.
	cp := filepath.Join(t.TempDir(), "copy.db")
	if _, err := dbfile.Snapshot(context.Background(), filepath.Join(dir, DBFileName), cp); err != nil {
		t.Fatal(err)
	}
	in, err := dbfile.Inspect(context.Background(), cp)
	if err != nil {
		t.Fatal(err)
	}
	return in.Companies
}

// TestBackupCommand: the refusals of clasp backup (no --to, an existing
// file without --force, a directory, no database, a PostgreSQL URL) and a
// backup that --force lets replace a file.
func TestBackupCommand(t *testing.T) {
	t.Parallel()
	dir := newDataDir(t, "acme")
	to := filepath.Join(t.TempDir(), "b.db")
	r := runCLI(t, nil, "", "backup", "--data-dir", dir, "--to", to)
	if r.code != ExitOK || !strings.Contains(r.stderr, "integrity ok") || !strings.Contains(r.stderr, "1 companies") {
		t.Fatalf("backup: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, c := range []struct {
		name string
		env  map[string]string
		args []string
		code int
		want string
	}{
		{"no --to", nil, []string{"backup", "--data-dir", dir}, ExitUsage, "--to FILE is required"},
		{"the database", nil, []string{"backup", "--data-dir", dir, "--to", filepath.Join(dir, DBFileName), "--force"}, ExitUsage, "is the database itself"},
		{"exists", nil, []string{"backup", "--data-dir", dir, "--to", to}, ExitUsage, "already exists; pass --force"},
		{"directory", nil, []string{"backup", "--data-dir", dir, "--to", t.TempDir()}, ExitUsage, "is a directory"},
		{"no parent", nil, []string{"backup", "--data-dir", dir, "--to", filepath.Join(t.TempDir(), "no", "b.db")}, ExitUsage, "does not exist"},
		{"no database", nil, []string{"backup", "--data-dir", t.TempDir(), "--to", filepath.Join(t.TempDir(), "b.db")}, ExitError, "no database at"},
		{"postgres", map[string]string{EnvDatabaseURL: "postgres://x/y"}, []string{"backup", "--to", filepath.Join(t.TempDir(), "b.db")}, ExitUsage, "pg_dump"},
		{"postgres restore", map[string]string{EnvDatabaseURL: "postgres://x/y"}, []string{"restore", "--from", to}, ExitUsage, "pg_restore"},
		{"postgres flag", nil, []string{"backup", "--database-url", "postgres://x/y", "--to", filepath.Join(t.TempDir(), "b.db")}, ExitUsage, "pg_dump -Fc"},
		{"restore itself", nil, []string{"restore", "--data-dir", dir, "--from", filepath.Join(dir, DBFileName)}, ExitUsage, "is the database it would replace"},
		{"no --from", nil, []string{"restore", "--data-dir", dir}, ExitUsage, "--from FILE is required"},
	} {
		r := runCLI(t, c.env, "", c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d and %q", c.name, r.code, r.stderr, c.code, c.want)
		}
	}
	newer := newDataDir(t, "acme")
	db, err := sql.Open("sqlite", filepath.Join(newer, DBFileName))
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec("INSERT INTO goose_db_version (version_id, is_applied) VALUES (?, 1)", sqlite.LatestSchemaVersion()+1)
	_ = db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, nil, "", "backup", "--data-dir", newer, "--to", filepath.Join(t.TempDir(), "b.db")); r.code != ExitError || !strings.Contains(r.stderr, "run the backup with the clasp binary the server runs") {
		t.Errorf("backup of a newer schema: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := runCLI(t, nil, "", "backup", "--data-dir", dir, "--to", to, "--force"); r.code != ExitOK {
		t.Errorf("backup --force over an existing file: exit %d, stderr %q", r.code, r.stderr)
	}
	matches, _ := filepath.Glob(to + ".tmp-*")
	if len(matches) > 0 {
		t.Errorf("temporary files left beside the backup: %v", matches)
	}
}

// TestRestoreCommand: restore is refused while the data directory is in
// use (its lock held) and for a damaged file, leaving the database as it
// was; then it puts the backup back and keeps the replaced database; and
// a server cannot start on the directory while a restore holds it.
func TestRestoreCommand(t *testing.T) {
	t.Parallel()
	src := newDataDir(t, "acme", "beta")
	backupFile := filepath.Join(t.TempDir(), "b.db")
	if r := runCLI(t, nil, "", "backup", "--data-dir", src, "--to", backupFile); r.code != ExitOK {
		t.Fatalf("backup: exit %d, stderr %q", r.code, r.stderr)
	}
	dir := newDataDir(t, "gamma")

	unlock, err := useDataDir(dir) // what a running clasp serve holds
	if err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, nil, "", "restore", "--data-dir", dir, "--from", backupFile)
	if r.code != ExitError || !strings.Contains(r.stderr, "stop the server first") {
		t.Errorf("restore while the directory is in use: exit %d, stderr %q", r.code, r.stderr)
	}
	if runtime.GOOS != "windows" {
		unlockServe, err := lockServeDir(dir, true) // and its serve lock, naming it
		if err != nil {
			t.Fatal(err)
		}
		r = runCLI(t, nil, "", "restore", "--data-dir", dir, "--from", backupFile)
		unlockServe()
		if want := fmt.Sprintf("clasp serve (pid %d, SQLite) is using", os.Getpid()); r.code != ExitError || !strings.Contains(r.stderr, want) {
			t.Errorf("restore while a serve runs: exit %d, stderr %q; want it to contain %q", r.code, r.stderr, want)
		}
	}
	unlock()

	damaged := filepath.Join(t.TempDir(), "damaged.db")
	b, err := os.ReadFile(backupFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(damaged, b[:len(b)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, nil, "", "restore", "--data-dir", dir, "--from", damaged); r.code != ExitError || !strings.Contains(r.stderr, "refusing to restore") {
		t.Errorf("restore of a truncated file: exit %d, stderr %q", r.code, r.stderr)
	}
	if n := companiesIn(t, dir); n != 1 {
		t.Errorf("after the refused restores the database has %d companies, want its 1", n)
	}

	r = runCLI(t, nil, "", "restore", "--data-dir", dir, "--from", backupFile)
	if r.code != ExitOK || !strings.Contains(r.stderr, "kept as") {
		t.Fatalf("restore: exit %d, stderr %q", r.code, r.stderr)
	}
	if n := companiesIn(t, dir); n != 2 {
		t.Errorf("after the restore the database has %d companies, want the backup's 2", n)
	}
	kept, _ := filepath.Glob(filepath.Join(dir, DBFileName+".before-restore-*"))
	if len(kept) != 1 {
		t.Fatalf("kept databases: %v; want one", kept)
	}
	if in, err := dbfile.Inspect(context.Background(), kept[0]); err != nil || in.Companies != 1 {
		t.Errorf("the kept database: %+v, %v; want the replaced one with its 1 company", in, err)
	}

	// A restore holds the directory: serve's lock is refused meanwhile.
	unlock, err = lockDataDir(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if _, err := useDataDir(dir); err == nil || !strings.Contains(err.Error(), "being replaced by clasp restore") {
		t.Errorf("serve's lock during a restore: %v; want a refusal naming the restore", err)
	}
}

// TestBackupHelpAndCompletion: the help of both commands names their flags
// and what they check; the shell completion offers the commands and their
// flags.
func TestBackupHelpAndCompletion(t *testing.T) {
	t.Parallel()
	for cmd, wants := range map[string][]string{
		"backup":  {"--to", "--force", "--data-dir", "VACUUM INTO", "integrity_check", "clasp restore", "pg_dump"},
		"restore": {"--from", "--data-dir", "Stop the server first", "newer clasp", "before-restore", "pg_restore"},
	} {
		r := runCLI(t, nil, "", cmd, "--help")
		for _, w := range wants {
			if r.code != ExitOK || !strings.Contains(r.stdout, w) {
				t.Errorf("clasp %s --help: exit %d, missing %q in:\n%s", cmd, r.code, w, r.stdout)
			}
		}
	}
	if r := runCLI(t, nil, "", "__complete", "rest"); !strings.HasPrefix(r.stdout, "restore") {
		t.Errorf("clasp __complete rest: %q", r.stdout)
	}
	if r := runCLI(t, nil, "", "__complete", "backup", "--"); !strings.Contains(r.stdout, "--to") || !strings.Contains(r.stdout, "--force") {
		t.Errorf("clasp __complete backup --: %q", r.stdout)
	}
}
