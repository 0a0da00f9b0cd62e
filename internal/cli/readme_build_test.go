package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/clasp-dev/clasp"
)

// readmeBuildLine is the README's build command for the clasp binary (the
// first "go build ... ./cmd/clasp" line of its walkthrough).
var readmeBuildLine = regexp.MustCompile(`(?m)^go build [^#\n]*\./cmd/clasp\b`)

// buildREADMEClasp builds the clasp binary into a temporary directory with
// the README's own build command, run in dir under env (added to the
// process environment), and returns its path.
func buildREADMEClasp(t *testing.T, dir string, env ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the clasp binary; skipped with -short")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	line := readmeBuildLine.FindString(string(readme))
	if line == "" {
		t.Fatal("README.md has no `go build ... ./cmd/clasp` line")
	}
	args := strings.Fields(line)
	bin := filepath.Join(t.TempDir(), "clasp")
	for i := range args {
		if args[i] == "-o" && i+1 < len(args) {
			args[i+1] = bin
		}
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin
}

// TestREADMEBuildRecordsCommit: the README's build command, run in a clone,
// records the commit in the binary even where the go command is told
// -buildvcs=false through GOFLAGS (as on many CI machines), so `clasp
// version` names it. A git worktree (whose .git is a file) is not a place the
// go command reads a commit from, so there the command runs in a fresh clone
// of HEAD.
func TestREADMEBuildRecordsCommit(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on PATH")
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not in a git work tree: %v", err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(root, ".git")); err != nil || !fi.IsDir() {
		clone := filepath.Join(t.TempDir(), "clone")
		if out, err := exec.Command("git", "clone", "-q", "--shared", "--no-checkout", root, clone).CombinedOutput(); err != nil {
			t.Fatalf("git clone: %v\n%s", err, out)
		}
		if out, err := exec.Command("git", "-C", clone, "checkout", "-q", "--detach", strings.TrimSpace(string(head))).CombinedOutput(); err != nil {
			t.Fatalf("git checkout: %v\n%s", err, out)
		}
		root = clone
	}
	bin := buildREADMEClasp(t, root, "GOFLAGS=-buildvcs=false")
	out, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatalf("clasp version --json: %v", err)
	}
	var b clasp.BuildInfo
	if err := json.Unmarshal(out, &b); err != nil {
		t.Fatalf("clasp version --json: %q: %v", out, err)
	}
	if want := strings.TrimSpace(string(head)); b.Commit != want {
		t.Errorf("commit of the README's build under GOFLAGS=-buildvcs=false: %q, want %q (HEAD)", b.Commit, want)
	}
}
