package swarm

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
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
// the branch the grant named (the company's template; clasp/<identifier>
// by default). The worktrees of the same issue at older
// epochs (holds this machine worked that were superseded) are removed
// first, each with a log line, so that one is never worked again by
// mistake and the branch is free to check out; a worktree at a newer
// epoch means this hold is itself superseded: an error. A new worktree
// starts at the branch's tip when the branch exists (a previous holder's
// work), else at the repository's HEAD.
func (w *Worker) worktree(ctx context.Context, iss *clasp.Issue) (string, error) {
	repo := w.cfg.GitDir
	ws := workspaceOf(iss)
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
	if w.cfg.GitRemote != "" {
		// A clone of a shared repository: the hold starts from the tip of
		// its main branch, never from work a previous hold left on the
		// issue's branch (that work is not this hold's to merge).
		if _, err := gitIn(ctx, repo, "fetch", "-q", "origin", w.mainBranch()); err != nil {
			return "", err
		}
		if _, err := gitIn(ctx, repo, "rev-parse", "--verify", "-q", "refs/heads/"+ws.Branch); err == nil {
			if _, err := gitIn(ctx, repo, "branch", "-q", "-D", ws.Branch); err != nil {
				return "", err
			}
		}
		return path, addWorktree(ctx, repo, path, ws.Branch, "FETCH_HEAD")
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

// workspaceOf is the workspace the answer that granted iss named (the
// default branch and stamp of its epoch when it named none).
func workspaceOf(iss *clasp.Issue) *clasp.Workspace {
	if iss.Workspace != nil {
		return iss.Workspace
	}
	return clasp.WorkspaceOf(iss.Identifier, iss.CheckoutEpoch)
}

// commitResult writes the result of iss into its worktree (results/<identifier>)
// and commits it stamped with the hold's trailer; it returns the commit.
func (w *Worker) commitResult(ctx context.Context, iss *clasp.Issue, result string) (wt, commit string, err error) {
	wt, err = w.worktree(ctx, iss)
	if err != nil {
		return "", "", err
	}
	ws := workspaceOf(iss)
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

// The events of a worker that pushes to a shared repository
// (WorkerConfig.GitRemote).
const (
	// EventPushed: the hold's branch was pushed and the repository's gate
	// accepted it: issue=, run=, epoch=, ref=, commit=.
	EventPushed = "pushed"
	// EventPushRefused: the repository refused the push of the hold's
	// work: issue=, run=, epoch=, ref=, reason= (superseded, dead_holder,
	// not_held, future, unknown, unstamped, malformed, unreachable: the
	// gate could not ask the server, or refused for another reason).
	EventPushRefused = "push_refused"
	// EventNonFastForward: a push to the main branch was rejected as not
	// a fast-forward (another merge landed first); the merge is tried
	// again on the new tip: issue=, try=.
	EventNonFastForward = "non_fast_forward"
	// EventMerged: the hold's result commit is on the main branch:
	// issue=, run=, epoch=, commit=, tries=.
	EventMerged = "merged"
	// EventMergeFailed: the result of a done issue could not be merged
	// into the main branch: issue=, error=.
	EventMergeFailed = "merge_failed"
)

// mergeTries bounds the tries of a merge into the main branch that are
// rejected as not a fast-forward.
const mergeTries = 40

// unreachableTries bounds the tries of a push the gate refused because it
// could not ask the server (a replica down for a moment).
const unreachableTries = 5

// ensureClone clones cfg.GitRemote into cfg.GitDir when GitDir does not
// exist yet (each agent process works in its own clone); an existing
// GitDir must be a clone already.
func (w *Worker) ensureClone(ctx context.Context) error {
	if _, err := os.Stat(w.cfg.GitDir); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(w.cfg.GitDir), 0o750); err != nil {
		return err
	}
	_, err := gitIn(ctx, filepath.Dir(w.cfg.GitDir), "clone", "-q", "--origin", "origin", "--branch", w.mainBranch(), w.cfg.GitRemote, w.cfg.GitDir)
	return err
}

// CheckGitDir checks that dir can hold the worktrees of claims: a git
// repository whose HEAD names a commit (worktrees start from it). With
// remote set, a dir that does not exist yet is fine (it is cloned from
// remote). It returns nil, or an error saying what dir lacks and the git
// commands that make it a repository with a first commit.
func CheckGitDir(ctx context.Context, dir, remote string) error {
	if _, err := os.Stat(dir); err != nil {
		if remote != "" && os.IsNotExist(err) {
			return nil
		}
		if os.IsNotExist(err) {
			return fmt.Errorf("%s does not exist, so it is not a git repository: make one with 'git init %s' and a first commit ('git -C %s commit --allow-empty -m start')", dir, dir, dir)
		}
		return err
	}
	if _, err := gitIn(ctx, dir, "rev-parse", "--git-dir"); err != nil {
		return fmt.Errorf("%s is not a git repository: make one with 'git init %s' and a first commit ('git -C %s commit --allow-empty -m start')", dir, dir, dir)
	}
	if _, err := gitIn(ctx, dir, "rev-parse", "--verify", "-q", "HEAD^{commit}"); err != nil {
		return fmt.Errorf("the git repository %s has no commit yet, and the worktree of each claim starts from its HEAD: make one with 'git -C %s commit --allow-empty -m start'", dir, dir)
	}
	return nil
}

// gitWorkError is a failure of a step of the git work on an issue (make
// its worktree and commit the result, push its branch), as opposed to the
// reading of the file its description names: "could not <step>: <git's
// error>".
type gitWorkError struct {
	step string
	err  error
}

func (e *gitWorkError) Error() string { return "could not " + e.step + ": " + e.err.Error() }
func (e *gitWorkError) Unwrap() error { return e.err }

// mainBranch is the branch results are merged into (default "main").
func (w *Worker) mainBranch() string {
	if w.cfg.GitMain != "" {
		return w.cfg.GitMain
	}
	return "main"
}

// pushRefusal reads why git's push output says the repository refused it:
// "" when it was not refused by the repository (accepted, or rejected as
// not a fast-forward, see nonFastForward), else the gate's reason
// (GateSuperseded, GateDeadHolder, ...; "unreachable" when the gate could
// not ask the server; "refused" otherwise).
func pushRefusal(out string) string {
	if !strings.Contains(out, "remote rejected") && !strings.Contains(out, "hook declined") || refMoved(out) {
		return ""
	}
	for _, r := range []struct{ text, reason string }{
		{"superseded:", clasp.GateSuperseded},
		{"dead holder:", clasp.GateDeadHolder},
		{"not held:", clasp.GateNotHeld},
		{"future:", clasp.GateFuture},
		{"unknown:", clasp.GateUnknown},
		{"unstamped:", "unstamped"},
		{"malformed stamp", "malformed"},
		{"could not check", "unreachable"},
	} {
		if strings.Contains(out, r.text) {
			return r.reason
		}
	}
	return "refused"
}

// nonFastForward reports whether git's push output says a ref was
// rejected because its tip moved (another push landed first).
func nonFastForward(out string) bool {
	return strings.Contains(out, "[rejected]") && (strings.Contains(out, "fetch first") || strings.Contains(out, "non-fast-forward")) || refMoved(out)
}

// refMoved reports whether git's push output says the repository accepted
// the push's commits but could not move the ref: another push moved it
// while the pre-receive hook ran ("cannot lock ref ... is at X but
// expected Y", "failed to update ref"). It is a non-fast-forward found
// late.
func refMoved(out string) bool {
	return strings.Contains(out, "failed to update ref") || strings.Contains(out, "cannot lock ref")
}

// push runs git push in wt with args and returns its combined output and
// error.
func push(ctx context.Context, wt string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", wt, "push", "--porcelain"}, args...)...) // #nosec G204 -- git with arguments, no shell
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// pushBranch pushes the hold's branch (its worktree's HEAD) to origin,
// replacing what a previous holder left there (the new holder started
// from the main branch, not from that work). It returns "" when the
// repository accepted it, else the refusal's reason (pushRefusal); err
// for a failure that is not a refusal. A refusal because the gate could
// not ask the server is tried again, unreachableTries times at most.
func (w *Worker) pushBranch(ctx context.Context, wt string, ws *clasp.Workspace) (refused string, err error) {
	for try := 1; ; try++ {
		out, err := push(ctx, wt, "--force", "origin", "HEAD:refs/heads/"+ws.Branch)
		if err == nil {
			return "", nil
		}
		refused = pushRefusal(out)
		if refused != "" {
			w.log.Warn("the repository refused the push", "branch", ws.Branch, "reason", refused, "output", strings.TrimSpace(out))
		}
		if refused == "" {
			return "", fmt.Errorf("git push origin %s: %w: %s", ws.Branch, err, strings.TrimSpace(out))
		}
		if refused != "unreachable" || try == unreachableTries || !sleepCtx(ctx, time.Duration(try)*200*time.Millisecond) {
			return refused, nil
		}
	}
}

// mergeMain puts the hold's result commit on the main branch of origin:
// fetch the main branch, rebase the worktree's branch on it (each issue
// writes its own file, so the rebase never conflicts), push HEAD to it.
// A rejection as not a fast-forward (another merge landed first) starts
// over after a random pause that grows with the tries (up to 1 s), so
// that agents merging at once take turns; mergeTries times at most, each
// counted in an EventNonFastForward; a refusal by the repository's gate is returned as
// its reason. It returns the commit now on the main branch and the tries.
func (w *Worker) mergeMain(ctx context.Context, wt string, iss *clasp.Issue) (commit string, tries int, refused string, err error) {
	main := w.mainBranch()
	for try := 1; try <= mergeTries; try++ {
		if _, err := gitIn(ctx, wt, "fetch", "-q", "origin", main); err != nil {
			return "", try, "", err
		}
		if _, err := gitIn(ctx, wt, "-c", "user.name=clasp agent", "-c", "user.email=agent@clasp.invalid", "rebase", "-q", "FETCH_HEAD"); err != nil {
			_, _ = gitIn(ctx, wt, "rebase", "--abort") // best effort: leave the worktree as it was
			return "", try, "", err
		}
		out, perr := push(ctx, wt, "origin", "HEAD:refs/heads/"+main)
		if perr == nil {
			commit, err := gitIn(ctx, wt, "rev-parse", "HEAD")
			return commit, try, "", err
		}
		if r := pushRefusal(out); r != "" {
			w.log.Warn("the repository refused the merge", "branch", main, "reason", r, "output", strings.TrimSpace(out))
			if r == "unreachable" && try < mergeTries && sleepCtx(ctx, time.Duration(try)*200*time.Millisecond) {
				continue
			}
			return "", try, r, nil
		}
		if !nonFastForward(out) {
			return "", try, "", fmt.Errorf("git push origin %s: %w: %s", main, perr, strings.TrimSpace(out))
		}
		w.ev.Emit(EventNonFastForward, "issue", iss.Identifier, "try", try)
		// Agents merging at once take turns: a random pause, growing with
		// the tries, spreads the next tries out.
		if !sleepCtx(ctx, rand.N(min(25*time.Millisecond<<min(try, 6), time.Second))) { // #nosec G404 -- a pause's jitter, not a secret
			return "", try, "", ctx.Err()
		}
	}
	return "", mergeTries, "", fmt.Errorf("merge into %s: still not a fast-forward after %d tries", main, mergeTries)
}
