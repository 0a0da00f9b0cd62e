package swarm_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/clasp-dev/clasp/internal/swarm"
)

// TestListFilesSkipsGitAndPackages: the files of .git and node_modules
// directories, symlinks and the skipped directories are not work; every
// other regular file is, once, with its SHA-256.
func TestListFilesSkipsGitAndPackages(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, 12)
	// A clasp data directory in the tree (a server started in it): its
	// live database is not work.
	for _, f := range []string{".clasp/clasp.db", ".clasp/clasp.db-wal", "d0/srv/board-token", "d0/srv/run-logs/r.log"} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("state"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	files, err := swarm.ListFiles(context.Background(), dir, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 12 {
		t.Fatalf("%d files, want the 12 written (none from .git, node_modules, data directories or the symlink)", len(files))
	}
	for _, f := range files {
		if len(f.SHA256) != 64 {
			t.Errorf("%s: SHA-256 %q", f.Rel, f.SHA256)
		}
	}
}
