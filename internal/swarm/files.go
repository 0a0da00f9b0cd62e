package swarm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// File is one unit of work: a regular file under the swarm's directory.
type File struct {
	Rel    string // path relative to the directory, slash-separated: the issue title
	Abs    string // absolute path: the issue description, what the agent hashes
	SHA256 string // hex SHA-256 computed by the swarm itself, the expected result
}

// ListFiles walks dir and returns its regular files sorted by relative path,
// skipping directories named .git or node_modules (installed packages, not
// the tree's own files), clasp data directories (isDataDir: a live
// database changes under the swarm's feet) and the directories in skip (absolute
// paths, e.g. the swarm's own data directory), symlinks and other special
// files. max > 0 keeps only the first max files. It hashes every file it
// keeps, a few at a time.
func ListFiles(ctx context.Context, dir string, skip []string, max int) ([]File, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", dir, err)
	}
	skipSet := map[string]bool{}
	for _, s := range skip {
		if s == "" {
			continue
		}
		if a, err := filepath.Abs(s); err == nil {
			skipSet[filepath.Clean(a)] = true
		}
	}
	var files []File
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (d.Name() == ".git" || d.Name() == "node_modules" || skipSet[path] || isDataDir(path)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		files = append(files, File{Rel: filepath.ToSlash(rel), Abs: path})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk %s: %w", root, err)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Rel < files[j].Rel })
	if max > 0 && len(files) > max {
		files = files[:max]
	}
	if err := hashAll(ctx, files); err != nil {
		return nil, err
	}
	return files, nil
}

// hashAll fills in SHA256 of every file with a few goroutines.
func hashAll(ctx context.Context, files []File) error {
	return parallel(ctx, len(files), func(i int) (err error) {
		files[i].SHA256, err = HashFile(ctx, files[i].Abs, 0)
		return err
	})
}

// hashSteps is how many pieces a slowed hash is cut into: the work sleeps
// slow/hashSteps between pieces, so a kill can land at any point of it.
const hashSteps = 10

// HashFile returns the hex SHA-256 of the file at path. slow > 0 stretches
// the work to at least that long, sleeping in hashSteps small steps between
// reads (so that the swarm's kills land in the middle of a checkout); it
// returns ctx's error if ctx ends first.
func HashFile(ctx context.Context, path string, slow time.Duration) (string, error) {
	f, err := os.Open(path) // #nosec G304 -- a file under the swarm's own data directory
	if err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	if slow <= 0 {
		if _, err := io.Copy(h, f); err != nil {
			return "", fmt.Errorf("hash %s: %w", path, err)
		}
		return hex.EncodeToString(h.Sum(nil)), nil
	}
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	chunk := max(st.Size()/hashSteps+1, 1)
	step := slow / hashSteps
	t := time.NewTimer(step)
	defer t.Stop()
	for i := range hashSteps {
		if _, err := io.CopyN(h, f, chunk); err != nil && err != io.EOF {
			return "", fmt.Errorf("hash %s: %w", path, err)
		}
		if i > 0 {
			t.Reset(step)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	// Whatever the file grew by since Stat.
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// isDataDir reports whether dir is a clasp data directory: it holds a
// clasp.db or a board-token file, as `clasp serve --data-dir` makes.
func isDataDir(dir string) bool {
	for _, name := range []string{"clasp.db", "board-token"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}
