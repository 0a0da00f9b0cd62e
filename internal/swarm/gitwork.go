package swarm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/clasp-dev/clasp"
)

// EventCommitted is the event of a result committed in the issue's
// worktree: issue=, run=, epoch=, commit=, worktree=.
const EventCommitted = "committed"

// WorktreesDir is the directory of the worktrees of claims, inside the
// repository given to `clasp agent work --git`.
const WorktreesDir = ".clasp-worktrees"

// gitIn runs git in dir and returns its trimmed standard output.
func gitIn(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...) // #nosec G204 -- git with arguments, no shell
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// worktree returns the worktree in which the hold of iss at its epoch
// works (RULES.md G5): <repo>/.clasp-worktrees/<identifier>@<epoch>, on
// branch clasp/<identifier>. The worktrees of the same issue at older
// epochs (holds this machine worked that were superseded) are removed
// first, each with a log line, so that one is never worked again by
// mistake and the branch is free to check out; a worktree at a newer
// epoch means this hold is itself superseded: an error. A new worktree
// starts at the branch's tip when the branch exists (a previous holder's
// work), else at the repository's HEAD.
func (w *Worker) worktree(ctx context.Context, iss *clasp.Issue) (string, error) {
	repo := w.cfg.GitDir
	ws := clasp.WorkspaceOf(iss.Identifier, iss.CheckoutEpoch)
	if iss.Workspace != nil {
		ws = iss.Workspace
	}
	root := filepath.Join(repo, WorktreesDir)
	path := filepath.Join(root, clasp.StampValue(iss.Identifier, ws.Epoch))
	olds, _ := filepath.Glob(filepath.Join(root, iss.Identifier+"@*"))
	for _, old := range olds {
		e, err := strconv.ParseInt(strings.TrimPrefix(filepath.Base(old), iss.Identifier+"@"), 10, 64)
		switch {
		case err != nil || e == ws.Epoch:
			continue
		case e > ws.Epoch:
			return "", fmt.Errorf("worktree %s is of a later hold of %s than this one (epoch %d): this hold is superseded", old, iss.Identifier, ws.Epoch)
		}
		w.log.Info("removing the worktree of a superseded hold", "issue", iss.Identifier, "worktree", old, "epoch", e, "currentEpoch", ws.Epoch)
		if _, err := gitIn(ctx, repo, "worktree", "remove", "--force", old); err != nil {
			return "", err
		}
	}
	if _, err := gitIn(ctx, repo, "worktree", "prune"); err != nil {
		return "", err
	}
	if _, err := os.Stat(path); err == nil {
		return path, nil // this hold's own worktree, from an earlier try
	}
	if _, err := gitIn(ctx, repo, "rev-parse", "--verify", "-q", "refs/heads/"+ws.Branch); err == nil {
		return path, addWorktree(ctx, repo, path, ws.Branch, "")
	}
	return path, addWorktree(ctx, repo, path, ws.Branch, "HEAD")
}

// worktreeAddTries bounds the tries of addWorktree.
const worktreeAddTries = 8

// addWorktree adds the worktree path of repo on branch: the existing
// branch when start is "", else branch created (or reset) at start, with
// no upstream recorded. Agents on one machine add worktrees to the same
// repository at once, and git then fails on its lock files (config.lock,
// index.lock, a .git/worktrees entry another add is making); such a
// failure is retried, after the half-made worktree is cleared, up to
// worktreeAddTries times with a short growing pause. Any other failure,
// or the last lock failure, is returned as git's error.
func addWorktree(ctx context.Context, repo, path, branch, start string) error {
	args := []string{"worktree", "add", "-q", path, branch}
	if start != "" {
		args = []string{"worktree", "add", "-q", "--no-track", "-b", branch, path, start}
	}
	for try := 1; ; try++ {
		_, err := gitIn(ctx, repo, args...)
		if err == nil || try == worktreeAddTries || !gitLockError(err) {
			return err
		}
		// A failed add may have created the branch (then -B: it is ours,
		// made at start by this add) or the directory without registering
		// it.
		if start != "" {
			args = []string{"worktree", "add", "-q", "--no-track", "-B", branch, path, start}
		}
		if _, serr := os.Stat(filepath.Join(path, ".git")); serr != nil {
			_ = os.RemoveAll(path) // best effort: a directory git made and did not register; the next add reports what remains
		}
		if !sleepCtx(ctx, time.Duration(try)*20*time.Millisecond) {
			return err
		}
	}
}

// gitLockError reports whether err is git failing on a lock another git
// process holds in the same repository: "Unable to create '.../index.lock':
// File exists", "could not lock config file", or a .git/worktrees entry
// read while another add makes it.
func gitLockError(err error) bool {
	s := err.Error()
	switch {
	case strings.Contains(s, ".lock") && (strings.Contains(s, "File exists") || strings.Contains(s, "could not lock") || strings.Contains(s, "Unable to create")):
		return true
	case strings.Contains(s, "could not lock config file"):
		return true
	case strings.Contains(s, "/worktrees/") && (strings.Contains(s, "failed to read") || strings.Contains(s, "could not create")):
		return true
	}
	return false
}

// commitResult writes the result of iss into its worktree (results/<identifier>)
// and commits it stamped with the hold's trailer; it returns the commit.
func (w *Worker) commitResult(ctx context.Context, iss *clasp.Issue, result string) (wt, commit string, err error) {
	wt, err = w.worktree(ctx, iss)
	if err != nil {
		return "", "", err
	}
	ws := clasp.WorkspaceOf(iss.Identifier, iss.CheckoutEpoch)
	if iss.Workspace != nil {
		ws = iss.Workspace
	}
	file := filepath.Join(wt, "results", iss.Identifier)
	if err := os.MkdirAll(filepath.Dir(file), 0o750); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(file, []byte(result+"\n"), 0o600); err != nil {
		return "", "", err
	}
	if _, err := gitIn(ctx, wt, "add", "results/"+iss.Identifier); err != nil {
		return "", "", err
	}
	args := []string{"commit", "-q", "--allow-empty", "-m", iss.Identifier + ": " + iss.Title, "--trailer", ws.Stamp}
	if name, _ := gitIn(ctx, wt, "config", "user.name"); name == "" {
		args = append([]string{"-c", "user.name=clasp agent", "-c", "user.email=agent@clasp.invalid"}, args...)
	}
	if _, err := gitIn(ctx, wt, args...); err != nil {
		return "", "", err
	}
	commit, err = gitIn(ctx, wt, "rev-parse", "HEAD")
	return wt, commit, err
}
