package swarm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// The git swarm (Config.Git; RULES.md G6): the agents share a bare repository whose
// pre-receive hook is the gate (`clasp gate install`). Each agent process
// works in its own clone (`clasp agent work --git CLONE --git-remote
// REPO`): a worktree per claim, the result committed stamped with the
// hold's trailer, the branch pushed, the issue set done, the result
// merged into main. The fault injector also freezes processes (SIGSTOP
// until the frozen hold's run is swept and, for a bounded time, until its
// issue is taken over; then SIGCONT), so that a holder presumed dead wakes
// up and pushes: the gate must refuse it.

// GitTally is what the git swarm counted.
type GitTally struct {
	Repo string `json:"repo"` // the shared bare repository
	// Commits counts results committed in worktrees (event committed),
	// Pushes the branch pushes the gate accepted, Merges the result
	// commits put on main by the agents, NonFastForwardRetries the merges
	// tried again because another merge landed first.
	Commits               int `json:"commits"`
	Pushes                int `json:"pushes"`
	Merges                int `json:"merges"`
	NonFastForwardRetries int `json:"nonFastForwardRetries"`
	// StalePushesRefused counts the pushes the gate refused because their
	// hold was superseded, its run dead, or its lock cleared by the
	// sweeper (not_held); PushesRefused splits every refusal by reason.
	StalePushesRefused int            `json:"stalePushesRefused"`
	PushesRefused      map[string]int `json:"pushesRefused"`
	// Freezes counts SIGSTOPs, FrozenSwept the frozen holds whose run was
	// swept before their SIGCONT, FrozenTakenOver those whose issue another
	// hold took over before it, FrozenPushesRefused the pushes of frozen
	// holds after their SIGCONT that the gate refused.
	Freezes             int `json:"freezes"`
	FrozenSwept         int `json:"frozenSwept"`
	FrozenTakenOver     int `json:"frozenTakenOver"`
	FrozenPushesRefused int `json:"frozenPushesRefused"`
	// MergeFailures counts done issues whose agent could not merge the
	// result (event merge_failed) and Landed the done issues whose result
	// the swarm merged from their branch at the end (a process killed
	// between setting the issue done and merging).
	MergeFailures int `json:"mergeFailures"`
	Landed        int `json:"landed"`
	// MainCommits counts the stamped commits on main after the run.
	MainCommits int `json:"mainCommits"`
}

// Names of the git swarm's checks (Violation.Check).
const (
	CheckMainCommits   = "main_commits"     // not exactly one result commit of the issue on main
	CheckMainEpoch     = "main_epoch"       // the commit on main is not stamped with the completed epoch
	CheckMainContent   = "main_content"     // main's result file of the issue is not the file's hash
	CheckMainUnstamped = "main_unstamped"   // a commit on main (besides the first) carries no stamp
	CheckBranchTip     = "branch_tip"       // the issue's branch does not end with the completing hold's commit
	CheckStalePush     = "stale_push"       // a push of a superseded hold was accepted
	CheckWorktreeTwice = "worktree_twice"   // a worktree was used by two runs
	CheckNoRefusal     = "no_stale_refusal" // holds were frozen past their lease, yet no push was refused
	CheckGit           = "git"              // the repository could not be read
)

// gitSlow is the git swarm's default Slow: the work of a frozen hold
// outlasts the moment the swarm stops it.
const gitSlow = 200 * time.Millisecond

// gitFreezeWait bounds, past the lease and two sweeps, how long a frozen
// process stays stopped waiting for its run to be swept and its issue
// taken over.
const gitFreezeWait = 20 * time.Second

// setupGit creates the shared bare repository (r.dataDir/git/shared.git)
// with a first commit on main, makes a gate token of the swarm's company
// through the API, and installs the gate as the repository's pre-receive
// hook with `clasp gate install` (ServerBinary). Errors say which step
// failed.
func (r *swarmRun) setupGit(ctx context.Context) error {
	root := filepath.Join(r.dataDir, "git")
	bare, seed := filepath.Join(root, "shared.git"), filepath.Join(root, "seed")
	if err := os.MkdirAll(root, 0o750); err != nil {
		return fmt.Errorf("git swarm: %w", err)
	}
	for _, c := range []struct {
		dir  string
		args []string
	}{
		{root, []string{"init", "-q", "--bare", "-b", "main", bare}},
		{root, []string{"clone", "-q", bare, seed}},
		{seed, []string{"checkout", "-q", "-b", "main"}},
		{seed, []string{"-c", "user.name=clasp swarm", "-c", "user.email=swarm@clasp.invalid", "commit", "-q", "--allow-empty", "-m", "start: results of the swarm's issues go under results/"}},
		{seed, []string{"push", "-q", "origin", "main"}},
	} {
		if _, err := gitIn(ctx, c.dir, c.args...); err != nil {
			return fmt.Errorf("git swarm: create the shared repository: %w", err)
		}
	}
	t, err := r.board.GateTokenCreate(ctx, r.co.ID, "swarm pre-receive")
	if err != nil {
		return fmt.Errorf("git swarm: create a gate token: %w", err)
	}
	tokenFile := filepath.Join(root, "gate-token")
	if err := os.WriteFile(tokenFile, []byte(t.Token+"\n"), 0o600); err != nil {
		return fmt.Errorf("git swarm: %w", err)
	}
	// --clasp: the hook lives as long as the swarm's repository, so the
	// swarm's own binary serves even from Go's build cache (go run).
	cmd := exec.CommandContext(ctx, r.cfg.ServerBinary, "gate", "install", "--repo", bare, "--gate-token-file", tokenFile, "--url", r.urlsFor(0)[0], "--clasp", r.cfg.ServerBinary) // #nosec G204 -- the clasp executable, no shell
	cmd.Env = append(os.Environ(), "CLASP_TOKEN=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git swarm: clasp gate install: %w: %s", err, strings.TrimSpace(string(out)))
	}
	r.rep.Git = &GitTally{Repo: bare, PushesRefused: map[string]int{}}
	r.git = &gitState{repo: bare, clones: filepath.Join(root, "clones"), worktrees: map[string]string{}}
	r.logf("shared repository %s with the gate as its pre-receive hook", bare)
	return nil
}

// gitState is what the supervisor follows of a git swarm.
type gitState struct {
	repo, clones string
	clone        int               // clones made, one per agent process
	worktrees    map[string]string // worktree -> the first run that committed in it
	twice        []Violation       // worktrees used by two runs
	stale        []Violation       // pushes of superseded holds that were accepted
}

// gitArgs returns the arguments that make agent process n (of its slot)
// work in its own clone of the shared repository.
func (s *supervisor) gitArgs(n int) []string {
	s.mu.Lock()
	s.git.clone++
	dir := filepath.Join(s.git.clones, fmt.Sprintf("agent-%02d-%04d", n, s.git.clone))
	s.mu.Unlock()
	return []string{"--git", dir, "--git-remote", s.git.repo}
}

// frozenHold is a hold whose process the swarm froze.
type frozenHold struct {
	issue, run string
	epoch      int64
	swept      bool // its run was no longer live before the SIGCONT
	thawed     bool // SIGCONT sent (guarded by supervisor.mu)
}

// freeze stops cmd's process (SIGSTOP) while it holds ev's issue, starts a
// replacement process for its slot (the frozen one is presumed dead), and
// sends SIGCONT once the hold's run was swept and its issue taken over,
// or after the lease, two sweeps and gitFreezeWait at most, or at once
// when ctx ends: a frozen process is always continued. It returns nil
// when the process could not be stopped (it had exited).
func (s *supervisor) freeze(ctx context.Context, n int, key string, cmd *exec.Cmd, ev Event) *frozenHold {
	epoch, _ := strconv.ParseInt(ev.Fields["epoch"], 10, 64)
	h := &frozenHold{issue: ev.Fields["issue"], run: ev.Fields["run"], epoch: epoch}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return nil
	}
	s.mu.Lock()
	s.gitTally.Freezes++
	s.mu.Unlock()
	pid := cmd.Process.Pid
	s.logf("froze agent %d (pid %d, SIGSTOP) holding %s at epoch %d; a replacement starts", n, pid, h.issue, h.epoch)
	s.slots.Go(func() { s.runSlot(ctx, n, key) })
	s.slots.Go(func() {
		why := "the wait for the sweep and the takeover ran out"
		defer func() {
			if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
				why += " (" + err.Error() + ")" // the process is gone
			}
			s.mu.Lock()
			h.thawed = true
			s.mu.Unlock()
			s.logf("continued agent %d (pid %d, SIGCONT): %s", n, pid, why)
		}()
		defer func() {
			if ctx.Err() != nil {
				why = "the swarm is stopping"
			}
		}()
		deadline := time.Now().Add(s.cfg.LeaseTTL + 2*s.cfg.SweepInterval + gitFreezeWait)
		poll := max(s.cfg.SweepInterval/4, 50*time.Millisecond)
		for time.Now().Before(deadline) {
			run, err := s.board.RunGet(ctx, h.run)
			if err == nil && run.Status != clasp.RunQueued && run.Status != clasp.RunRunning {
				s.mu.Lock()
				h.swept = true
				s.gitTally.FrozenSwept++
				s.mu.Unlock()
				break
			}
			if !sleepCtx(ctx, poll) {
				return
			}
		}
		for h.swept && time.Now().Before(deadline) {
			iss, err := s.board.IssueGet(ctx, h.issue)
			if err == nil && (iss.CheckoutEpoch > h.epoch || iss.Status == clasp.IssueDone) {
				s.mu.Lock()
				s.gitTally.FrozenTakenOver++
				s.mu.Unlock()
				why = fmt.Sprintf("its run was swept and %s taken over (epoch %d)", h.issue, iss.CheckoutEpoch)
				return
			}
			if !sleepCtx(ctx, poll) {
				return
			}
		}
	})
	return h
}

// gitEvent counts a git event of a process (frozen: its frozen hold, or
// nil) and records the violations it shows.
func (s *supervisor) gitEvent(ev Event, frozen *frozenHold) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, t := s.git, &s.gitTally
	ofFrozen := frozen != nil && frozen.thawed && ev.Fields["issue"] == frozen.issue && ev.Fields["epoch"] == strconv.FormatInt(frozen.epoch, 10)
	switch ev.Name {
	case EventCommitted:
		t.Commits++
		wt, run := ev.Fields["worktree"], ev.Fields["run"]
		if first, ok := g.worktrees[wt]; ok && first != run {
			g.twice = append(g.twice, Violation{Issue: ev.Fields["issue"], Check: CheckWorktreeTwice, Detail: fmt.Sprintf("worktree %s used by run %s and by run %s", wt, first, run)})
		} else if !ok {
			g.worktrees[wt] = run
		}
	case EventPushed:
		t.Pushes++
		if ofFrozen && frozen.swept {
			g.stale = append(g.stale, Violation{Issue: frozen.issue, Check: CheckStalePush, Detail: fmt.Sprintf("the push of %s by run %s (epoch %d), swept while its process was frozen, was accepted", ev.Fields["ref"], frozen.run, frozen.epoch)})
		}
	case EventPushRefused:
		reason := ev.Fields["reason"]
		t.PushesRefused[reason]++
		if reason == clasp.GateSuperseded || reason == clasp.GateDeadHolder || reason == clasp.GateNotHeld {
			t.StalePushesRefused++
		}
		if ofFrozen {
			t.FrozenPushesRefused++
		}
	case EventMerged:
		t.Merges++
		if ofFrozen && frozen.swept {
			g.stale = append(g.stale, Violation{Issue: frozen.issue, Check: CheckStalePush, Detail: fmt.Sprintf("the merge into main by run %s (epoch %d), swept while its process was frozen, was accepted", frozen.run, frozen.epoch)})
		}
	case EventNonFastForward:
		t.NonFastForwardRetries++
	case EventMergeFailed:
		t.MergeFailures++
	}
}

// mainStamp is one commit of main: its hash, its first stamp's issue and
// epoch ("" and 0 when it carries none), the number of stamps.
type mainStamp struct {
	commit string
	issue  string
	epoch  int64
	stamps int
}

// mainLog reads the commits of repo's main, oldest first.
func mainLog(ctx context.Context, repo string) ([]mainStamp, error) {
	out, err := gitIn(ctx, repo, "log", "--reverse", "--format=%H%x1f%(trailers:key="+clasp.StampKey+",valueonly,separator=%x1f)%x1e", "main")
	if err != nil {
		return nil, err
	}
	var cs []mainStamp
	for _, rec := range strings.Split(out, "\x1e") {
		parts := strings.Split(strings.TrimSpace(rec), "\x1f")
		if parts[0] == "" {
			continue
		}
		c := mainStamp{commit: parts[0]}
		for _, v := range parts[1:] {
			if v = strings.TrimSpace(v); v == "" {
				continue
			}
			c.stamps++
			if st, ok := clasp.ParseStamp(v); ok && c.issue == "" {
				c.issue, c.epoch = st.Issue, st.Epoch
			}
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// branchTip returns the first stamp of the tip of repo's branch: ok is
// false when the branch does not exist or its tip carries no stamp.
func branchTip(ctx context.Context, repo, branch string) (commit string, st clasp.GateStamp, ok bool) {
	out, err := gitIn(ctx, repo, "log", "-1", "--format=%H%x1f%(trailers:key="+clasp.StampKey+",valueonly,separator=%x1f)", "refs/heads/"+branch, "--")
	if err != nil {
		return "", clasp.GateStamp{}, false
	}
	parts := strings.Split(out, "\x1f")
	if len(parts) < 2 {
		return parts[0], clasp.GateStamp{}, false
	}
	st, ok = clasp.ParseStamp(parts[1])
	return parts[0], st, ok
}

// checkGit proves the outcome from the shared repository and the issues:
// first it lands the result of every done issue that is not on main yet
// (its agent was killed between setting it done and merging: the swarm
// merges the tip of its branch, through the gate, when that tip is
// stamped with the completed epoch), then it checks that main holds
// exactly one stamped commit per issue, stamped with the epoch that
// completed it, whose result file is the file's hash; that no other
// commit on main but the first lacks a stamp; that each issue's branch
// ends with the completing hold's commit; that no worktree was used by
// two runs and no push of a hold swept while frozen was accepted; and
// that freezes past the lease, when there were any, had pushes refused.
func (r *swarmRun) checkGit(ctx context.Context) {
	g, rep := r.git, r.rep.Git
	add := func(issue, check, format string, args ...any) {
		r.violations = append(r.violations, Violation{Issue: issue, Check: check, Detail: fmt.Sprintf(format, args...)})
	}
	r.sup.mu.Lock()
	t := r.sup.gitTally
	t.Repo, t.PushesRefused = rep.Repo, r.sup.gitTally.PushesRefused
	r.violations = append(r.violations, g.twice...)
	r.violations = append(r.violations, g.stale...)
	r.sup.mu.Unlock()
	*rep = t

	page, err := r.board.IssueList(ctx, r.co.ID, client.IssueListParams{Limit: 1000})
	var issues []*clasp.Issue
	if err == nil {
		issues, err = page.All(ctx)
	}
	if err != nil {
		add("", CheckRead, "list issues: %v", err)
		return
	}
	sort.Slice(issues, func(i, j int) bool { return issues[i].Identifier < issues[j].Identifier })
	commits, err := mainLog(ctx, g.repo)
	if err != nil {
		add("", CheckGit, "read main: %v", err)
		return
	}
	onMain := map[string]int{}
	for _, c := range commits {
		if c.issue != "" {
			onMain[c.issue]++
		}
	}
	if landed, err := r.land(ctx, issues, onMain); err != nil {
		add("", CheckGit, "land the results of done issues not on main: %v", err)
	} else if rep.Landed = landed; landed > 0 {
		if commits, err = mainLog(ctx, g.repo); err != nil {
			add("", CheckGit, "read main: %v", err)
			return
		}
	}

	byIssue := map[string][]mainStamp{}
	for i, c := range commits {
		switch {
		case c.issue != "":
			byIssue[c.issue] = append(byIssue[c.issue], c)
			rep.MainCommits++
		case i > 0:
			add("", CheckMainUnstamped, "commit %s on main carries no %s stamp", c.commit, clasp.StampKey)
		}
	}
	known := map[string]bool{}
	for _, iss := range issues {
		known[iss.Identifier] = true
		cs := byIssue[iss.Identifier]
		if len(cs) != 1 {
			add(iss.Identifier, CheckMainCommits, "%d result commits on main, want exactly one", len(cs))
			continue
		}
		if iss.CompletedEpoch == nil || cs[0].epoch != *iss.CompletedEpoch {
			add(iss.Identifier, CheckMainEpoch, "the commit on main %s is stamped at epoch %d; the issue was completed at epoch %s", cs[0].commit, cs[0].epoch, i64(iss.CompletedEpoch))
		}
		want := ResultPrefix + r.expected[iss.ID] + "\n"
		if got, err := gitIn(ctx, g.repo, "show", cs[0].commit+":results/"+iss.Identifier); err != nil || got+"\n" != want {
			add(iss.Identifier, CheckMainContent, "results/%s of commit %s is %q (%v), want %q", iss.Identifier, cs[0].commit, got, err, strings.TrimSpace(want))
		}
		branch := r.branchOf(iss.Identifier)
		if commit, st, ok := branchTip(ctx, g.repo, branch); !ok || iss.CompletedEpoch == nil || st.Epoch != *iss.CompletedEpoch || st.Issue != iss.Identifier {
			add(iss.Identifier, CheckBranchTip, "branch %s ends with %s stamped %s@%d; want the commit of the hold that completed it (epoch %s)", branch, commit, st.Issue, st.Epoch, i64(iss.CompletedEpoch))
		}
	}
	for id := range byIssue {
		if !known[id] {
			add(id, CheckMainCommits, "main holds a commit stamped with %s, no issue of the swarm", id)
		}
	}
	if rep.FrozenSwept > 0 && rep.StalePushesRefused == 0 {
		add("", CheckNoRefusal, "%d frozen holds were swept before they woke, yet the gate refused no push of a superseded or dead holder", rep.FrozenSwept)
	}
}

// land merges into main, through the gate, the branch tip of every done
// issue that has no commit on main (onMain counts them by identifier),
// when that tip is stamped with the issue's completed epoch; it returns
// how many it landed. The others are left to the checks.
func (r *swarmRun) land(ctx context.Context, issues []*clasp.Issue, onMain map[string]int) (int, error) {
	var todo []*clasp.Issue
	for _, iss := range issues {
		if iss.Status != clasp.IssueDone || iss.CompletedEpoch == nil || onMain[iss.Identifier] > 0 {
			continue
		}
		if _, st, ok := branchTip(ctx, r.git.repo, r.branchOf(iss.Identifier)); ok && st.Issue == iss.Identifier && st.Epoch == *iss.CompletedEpoch {
			todo = append(todo, iss)
		}
	}
	if len(todo) == 0 {
		return 0, nil
	}
	dir := filepath.Join(filepath.Dir(r.git.clones), "lander")
	if _, err := os.Stat(dir); err != nil {
		if _, err := gitIn(ctx, filepath.Dir(dir), "clone", "-q", "--branch", "main", r.git.repo, dir); err != nil {
			return 0, err
		}
	}
	id := []string{"-c", "user.name=clasp swarm", "-c", "user.email=swarm@clasp.invalid"}
	for _, iss := range todo {
		branch := r.branchOf(iss.Identifier)
		for _, args := range [][]string{
			{"fetch", "-q", "origin", "main", branch},
			{"checkout", "-q", "-B", "land", "origin/main"},
			append(append([]string{}, id...), "cherry-pick", "origin/"+branch),
		} {
			if _, err := gitIn(ctx, dir, args...); err != nil {
				return 0, err
			}
		}
		if out, err := push(ctx, dir, "origin", "HEAD:refs/heads/main"); err != nil {
			return 0, fmt.Errorf("push the result of %s to main: %w: %s", iss.Identifier, err, strings.TrimSpace(out))
		}
		r.logf("landed the result of %s from %s (its agent set it done, then died before merging)", iss.Identifier, branch)
	}
	return len(todo), nil
}

// branchOf is the branch of issue identifier under the swarm company's
// branch template.
func (r *swarmRun) branchOf(identifier string) string {
	return clasp.BranchName(r.co.BranchTemplate, r.co.IssuePrefix, identifier)
}

func i64(p *int64) string {
	if p == nil {
		return "null"
	}
	return strconv.FormatInt(*p, 10)
}
