package swarm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/clasp-dev/clasp"
)

// TestAddWorktreeConcurrent adds 8 worktrees to one clone at once, each on
// a new branch started from the remote-tracking main (the setup that makes
// git contend for .git/config.lock), three times over: every add must
// succeed, each worktree on its own branch.
func TestAddWorktreeConcurrent(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	ctx := context.Background()
	tmp := t.TempDir()
	origin, repo := filepath.Join(tmp, "origin"), filepath.Join(tmp, "clone")
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	for _, args := range [][]string{
		{"-C", tmp, "init", "-q", "-b", "main", origin},
		{"-C", origin, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-q", "--allow-empty", "-m", "start"},
		{"-C", tmp, "clone", "-q", origin, repo},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	for round := range 3 {
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range 8 {
			wg.Go(func() {
				branch := fmt.Sprintf("clasp/T-%d", round*8+i+1)
				errs[i] = addWorktree(ctx, repo, filepath.Join(repo, WorktreesDir, fmt.Sprintf("T-%d@1", round*8+i+1)), branch, "origin/main")
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d, worktree %d: %v", round, i, err)
			}
		}
	}
	out, err := gitIn(ctx, repo, "worktree", "list", "--porcelain")
	if err != nil {
		t.Fatal(err)
	}
	branches := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if b, ok := strings.CutPrefix(line, "branch refs/heads/clasp/"); ok {
			if branches[b] {
				t.Errorf("branch clasp/%s checked out twice", b)
			}
			branches[b] = true
		}
	}
	if len(branches) != 24 {
		t.Errorf("%d worktrees on clasp/ branches, want 24:\n%s", len(branches), out)
	}
}

// TestGitLockError tells git's lock failures from the others.
func TestGitLockError(t *testing.T) {
	for msg, want := range map[string]bool{
		"git worktree add: exit status 255: error: could not lock config file .git/config: File exists":         true,
		"git worktree add: exit status 128: fatal: Unable to create '/r/.git/index.lock': File exists.":         true,
		"git worktree add: exit status 128: fatal: failed to read .git/worktrees/T-1@1/commondir: Success":      true,
		"git worktree add: exit status 128: fatal: 'clasp/T-1' is already checked out at '/r/.clasp-worktrees'": false,
		"git worktree add: exit status 128: fatal: invalid reference: origin/main":                              false,
	} {
		if got := gitLockError(fmt.Errorf("%s", msg)); got != want {
			t.Errorf("gitLockError(%q) = %v, want %v", msg, got, want)
		}
	}
}

// TestPushOutcome reads git push's outputs: the gate's refusals by
// reason, a rejection as not a fast-forward, and a ref another push moved
// while the hook ran (a non-fast-forward found late, not a refusal).
func TestPushOutcome(t *testing.T) {
	for _, c := range []struct {
		out     string
		refused string
		nonFF   bool
	}{
		{"remote: refused 1234 EX-1: t: superseded: EX-1 is at epoch 2, held by run r of agent b\n!\tHEAD:refs/heads/clasp/EX-1\t[remote rejected] (pre-receive hook declined)", clasp.GateSuperseded, false},
		{"remote: refused 1234 EX-1: t: dead holder: EX-1 is at epoch 2\n!\tHEAD:refs/heads/clasp/EX-1\t[remote rejected] (pre-receive hook declined)", clasp.GateDeadHolder, false},
		{"remote: Error: gate: refusing, the clasp server could not check the stamps: dial tcp\n!\tHEAD:refs/heads/main\t[remote rejected] (pre-receive hook declined)", "unreachable", false},
		{"!\tHEAD:refs/heads/main\t[rejected] (fetch first)", "", true},
		{"remote: error: cannot lock ref 'refs/heads/main': is at 311d but expected fbb6\n!\tHEAD:refs/heads/main\t[remote rejected] (failed to update ref)", "", true},
		{"=\tHEAD:refs/heads/main\t[up to date]", "", false},
	} {
		if got := pushRefusal(c.out); got != c.refused {
			t.Errorf("pushRefusal(%q) = %q, want %q", c.out, got, c.refused)
		}
		if got := nonFastForward(c.out); got != c.nonFF {
			t.Errorf("nonFastForward(%q) = %v, want %v", c.out, got, c.nonFF)
		}
	}
}
