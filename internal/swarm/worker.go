package swarm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// ResultPrefix starts every result comment an agent writes: "sha256 <hex>".
// (Results written before failed work was told apart may read "sha256
// error: <why>".)
const ResultPrefix = "sha256 "

// FailurePrefix starts the comment an agent writes when it could not do the
// work (the file cannot be read): "work failed: <why>". The issue is then
// set blocked in the same write, never done, and its lock is released.
const FailurePrefix = "work failed: "

// ErrWorkFailed is returned (wrapped) by Run and RunMCP when the loop ended
// normally but some work failed: those issues were left blocked, each with
// a comment saying why.
var ErrWorkFailed = errors.New("work failed")

// WorkerConfig configures one agent process (`clasp agent work`).
type WorkerConfig struct {
	// URL is the server root, e.g. http://127.0.0.1:3100 (CLASP_URL), or
	// a comma-separated list of the roots of replicas on one database:
	// requests go to the first and move on to the next whenever a
	// connection cannot be made (a killed replica), see failoverTransport.
	URL   string
	Token string // the agent's API key (CLASP_TOKEN)
	// Slow stretches the work on each issue to at least this long (0: as
	// fast as the file can be hashed).
	Slow time.Duration
	// IdlePause is the pause between looks for work; the worker exits when
	// two looks in a row find nothing. Default 250 ms.
	IdlePause time.Duration
	// ConnRetry bounds how long connection errors are retried, with
	// backoff, before the worker gives up. Default 60 s.
	ConnRetry time.Duration
	// HTTPClient defaults to a client with a 30 s timeout per request
	// (failing over between the replicas of URL).
	HTTPClient *http.Client
	Events     io.Writer    // event lines (stdout); default os.Stdout
	Log        *slog.Logger // human logs (stderr); default slog.Default()
	// NoClaim finds work the old way (inbox, then a random unassigned todo
	// issue of the first page, each tried by checkout) instead of with
	// claim-next (POST /api/agents/me/claim), for comparison.
	NoClaim bool
	// RunID, when set, makes the worker work at most one issue in this
	// existing run (a server-managed run: Token is its run token, the
	// server renews its lease and ends it when the process exits) instead
	// of opening runs until no work is left (`clasp agent work --one-run`,
	// `clasp swarm --managed`). IssueID is the issue the run was woken for
	// (CLASP_ISSUE_ID; a retry after a process loss holds its execution
	// lock): it is checked out instead of claiming one.
	RunID   string
	IssueID string
	// GitDir, when set, is a git repository in which each claim works in
	// its own worktree (<GitDir>/.clasp-worktrees/<identifier>@<epoch>, on
	// the branch of the company's template, clasp/<identifier> by default)
	// and commits its result stamped with the
	// hold's trailer (RULES.md G5) before marking the issue done.
	GitDir string
	// GitRemote, with GitDir, is a shared repository (a URL or path git
	// takes): GitDir is cloned from it when it does not exist, each
	// claim's worktree starts from its main branch (GitMain, default
	// "main"), the hold's branch is pushed to it before the issue is set
	// done (a refusal by its gate drops the work, EventPushRefused), and
	// the result commit is merged into its main branch after (rebase and
	// push, tried again when another merge landed first).
	GitRemote string
	GitMain   string
}

// Worker is one agent process: the loop of `clasp agent work`. Build it
// with NewWorker and call Run once.
type Worker struct {
	cfg WorkerConfig
	c   *client.Client
	ev  *EventWriter
	log *slog.Logger
	me  *clasp.Agent

	done      int      // issues this process set done
	conflicts int      // checkouts answered 409
	blocked   []string // issues whose work failed, set blocked by this process
}

// NewWorker returns a Worker for cfg, filling in defaults.
func NewWorker(cfg WorkerConfig) *Worker {
	if cfg.IdlePause <= 0 {
		cfg.IdlePause = 250 * time.Millisecond
	}
	if cfg.ConnRetry <= 0 {
		cfg.ConnRetry = 60 * time.Second
	}
	urls := strings.Split(cfg.URL, ",")
	if cfg.HTTPClient == nil {
		hc, err := newFailoverClient(urls, 30*time.Second)
		if err != nil {
			hc = &http.Client{Timeout: 30 * time.Second} // the first request reports the bad URL
		}
		cfg.HTTPClient = hc
	}
	if cfg.Events == nil {
		cfg.Events = os.Stdout
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Worker{
		cfg: cfg,
		c:   client.New(strings.TrimSpace(urls[0]), client.WithToken(cfg.Token), client.WithHTTPClient(cfg.HTTPClient), client.WithUserAgent("clasp-agent-work")),
		ev:  NewEventWriter(cfg.Events),
		log: cfg.Log,
	}
}

// errNoWork ends the loop: two looks in a row found nothing to do.
var errNoWork = errors.New("no work left")

// Run works issues until there is none left (it returns nil), ctx ends (it
// completes the issue in hand, finishes its run and returns nil: this is
// SIGTERM), or a call fails for good (an error; connection errors are
// retried for ConnRetry first).
//
// Each turn of the loop opens a run, claims an issue (claim-next: the most
// urgent todo issue that is ours or unassigned, or an issue this agent held
// in a process that was killed, adopted under rule L1/S08; picked and
// checked out in one call, so agents never conflict; with NoClaim the old
// way, find: the inbox, then an unassigned todo issue picked at
// random on the first page, each tried by checkout), hashes the file
// named by its description while a goroutine heartbeats the run, writes the
// result and status done in one PATCH, and finishes the run.
func (w *Worker) Run(ctx context.Context) error {
	err := w.retry(ctx, func() error {
		me, err := w.c.Me(ctx)
		w.me = me
		return err
	})
	if err != nil {
		w.ev.Emit(EventExit, "reason", "error", "error", err)
		return fmt.Errorf("identify agent: %w", err)
	}
	if w.cfg.GitRemote != "" {
		if w.cfg.GitDir == "" {
			return errors.New("a shared repository (GitRemote) needs the directory of its clone (GitDir)")
		}
		if err := w.ensureClone(ctx); err != nil {
			w.ev.Emit(EventExit, "reason", "error", "error", err)
			return fmt.Errorf("clone %s: %w", w.cfg.GitRemote, err)
		}
	}
	if w.cfg.GitDir != "" {
		// Checked before any claim: a directory no worktree can be made
		// in would otherwise fail, and block, every issue claimed.
		if err := CheckGitDir(ctx, w.cfg.GitDir, ""); err != nil {
			w.ev.Emit(EventExit, "reason", "error", "error", err)
			return err
		}
	}
	w.ev.Emit(EventStarted, "agent", w.me.ID, "name", w.me.Name, "pid", os.Getpid())
	if w.cfg.RunID != "" {
		err := w.oneRun(ctx)
		if err != nil {
			w.ev.Emit(EventExit, "reason", "error", "done", w.done, "conflicts", w.conflicts, "error", err)
			return err
		}
		return w.exit("one_run")
	}
	for {
		err := w.turn(ctx)
		switch {
		case ctx.Err() != nil:
			return w.exit("signal")
		case errors.Is(err, errNoWork):
			return w.exit("no_work")
		case err != nil:
			w.ev.Emit(EventExit, "reason", "error", "done", w.done, "conflicts", w.conflicts, "error", err)
			return err
		}
	}
}

// exit prints the exit event of a loop that ended by itself (reason) and
// returns nil, or, when some work failed, an ErrWorkFailed naming the
// issues it left blocked (the exit event's reason is then work_failed).
func (w *Worker) exit(reason string) error {
	if len(w.blocked) == 0 {
		w.ev.Emit(EventExit, "reason", reason, "done", w.done, "conflicts", w.conflicts)
		return nil
	}
	err := fmt.Errorf("%w on %d issue(s), left blocked with a comment saying why: %s", ErrWorkFailed, len(w.blocked), strings.Join(w.blocked, ", "))
	w.ev.Emit(EventExit, "reason", "work_failed", "done", w.done, "conflicts", w.conflicts, "blocked", len(w.blocked), "error", err)
	return err
}

// turn is one run: open, find, work, finish. It returns errNoWork when there
// is nothing left, nil after an issue (done or lost), or an error.
func (w *Worker) turn(ctx context.Context) error {
	var run *clasp.Run
	ictx := client.WithIdempotencyKey(ctx, client.NewIdempotencyKey())
	waitUntil := time.Now().Add(liveRunsWait)
	for {
		err := w.retry(ctx, func() error {
			var err error
			run, err = w.c.RunOpen(ictx, client.RunOpenRequest{InvocationSource: "swarm"})
			return err
		})
		if err == nil {
			break
		}
		// At its live-run limit the agent waits for a run of its to end
		// (a killed process's run lives until its lease runs out), as
		// the answer's Retry-After says, for liveRunsWait at most.
		wait, limited := retryAfter(err)
		if !limited || time.Now().Add(wait).After(waitUntil) {
			return fmt.Errorf("open run: %w", err)
		}
		w.log.Info("at the agent's live-run limit; waiting for a run to end", "wait", wait)
		if !sleepCtx(ctx, wait) {
			return fmt.Errorf("open run: %w", err)
		}
	}
	// The run token is a credential bound to this run (RULES.md, Actors and credentials): every
	// call of the turn names the run.
	rc := w.c.WithRun(run.ID)
	if run.RunToken != "" {
		rc = w.c.WithToken(run.RunToken)
	}
	w.ev.Emit(EventRunOpened, "run", run.ID)

	// runCtx lives as long as the run: SIGTERM does not end it (the issue in
	// hand is completed: the work is short, and leaving cleanly is the point
	// of SIGTERM), the heartbeat does when it finds the run gone. findCtx
	// also ends on SIGTERM.
	runCtx, lose := context.WithCancelCause(context.WithoutCancel(ctx))
	defer lose(nil)
	stopHeartbeat := sync.OnceFunc(w.heartbeat(runCtx, rc, run, lose))
	defer stopHeartbeat()
	findCtx, stopFind := context.WithCancel(runCtx)
	defer stopFind()
	defer context.AfterFunc(ctx, stopFind)()

	find := w.findClaim
	if w.cfg.NoClaim {
		find = w.find
	}
	iss, from, err := find(findCtx, rc, run)
	if lost := context.Cause(runCtx); lost != nil || runGone(err) {
		// Our own run was swept while we looked for work (a stall past the
		// lease TTL): start over with a new run.
		stopHeartbeat()
		w.ev.Emit(EventRunLost, "run", run.ID, "error", cmp.Or(lost, err))
		return nil
	}
	if err != nil || iss == nil {
		stopHeartbeat()
		status := clasp.RunSucceeded
		if ctx.Err() != nil {
			status = clasp.RunCancelled
		}
		w.finish(runCtx, rc, run.ID, status, "")
		if err == nil {
			err = errNoWork
		}
		return err
	}
	w.ev.Emit(EventCheckedOut, "issue", iss.Identifier, "run", run.ID, "epoch", iss.CheckoutEpoch, "from", from)
	return w.work(runCtx, rc, run, iss, stopHeartbeat)
}

// oneRun works at most one issue in the existing run cfg.RunID: it checks
// out cfg.IssueID (todo or in_progress: a retry adopts the issue of its lost
// attempt) when set, else claims one (claim-next, once). Nothing to do (no
// claim, a conflict, the issue already done) is not an error: the process
// exits 0 and the server ends the run. The server renews the run's lease
// while the process lives, so no heartbeat is sent.
func (w *Worker) oneRun(ctx context.Context) error {
	run := &clasp.Run{ID: w.cfg.RunID}
	rc := w.c.WithRun(run.ID)
	runCtx, lose := context.WithCancelCause(context.WithoutCancel(ctx))
	defer lose(nil)
	var iss *clasp.Issue
	var from string
	err := w.retry(ctx, func() error {
		var err error
		if w.cfg.IssueID != "" {
			from = "wake"
			iss, err = rc.IssueCheckout(ctx, w.cfg.IssueID, client.CheckoutRequest{AgentID: w.me.ID,
				ExpectedStatuses: []clasp.IssueStatus{clasp.IssueTodo, clasp.IssueInProgress}})
			return err
		}
		from = "claim"
		iss, err = rc.Claim(ctx, client.ClaimRequest{Scope: "any", ExpectedStatuses: []clasp.IssueStatus{clasp.IssueTodo}})
		return err
	})
	switch code := clasp.ErrorCode(err); {
	case err == nil && iss == nil:
		w.ev.Emit(EventRunClosed, "run", run.ID, "status", "no_work")
		return nil
	case code == clasp.CodeCheckoutConflict:
		w.conflict(w.cfg.IssueID, run.ID, err)
		return nil
	case runGone(err):
		w.ev.Emit(EventRunLost, "run", run.ID, "error", err)
		return nil
	case err != nil:
		return fmt.Errorf("%s: %w", from, err)
	}
	w.ev.Emit(EventCheckedOut, "issue", iss.Identifier, "run", run.ID, "epoch", iss.CheckoutEpoch, "from", from)
	return w.work(runCtx, rc, run, iss, func() {})
}

// errRunLost is the cause of a turn's context when its run was swept.
var errRunLost = errors.New("run is no longer live")

// heartbeat renews run's lease every third of the lease TTL until the
// returned stop is called (stop waits for the goroutine; call it once). When the server
// says the run is gone (swept: this process stalled past the TTL) it calls
// lose, which ends the turn's work: its lock is gone.
func (w *Worker) heartbeat(ctx context.Context, rc *client.Client, run *clasp.Run, lose context.CancelCauseFunc) (stop func()) {
	hbCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	interval := max(leaseTTL(run)/3, 50*time.Millisecond)
	wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-hbCtx.Done():
				return
			case <-t.C:
			}
			_, err := rc.RunHeartbeat(hbCtx, run.ID)
			switch {
			case err == nil, hbCtx.Err() != nil:
			case runGone(err):
				lose(fmt.Errorf("%w: %w", errRunLost, err))
				return
			default:
				w.log.Warn("heartbeat failed", "run", run.ID, "err", err)
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}

// findClaim finds work with claim-next: one call picks and checks out the
// most urgent issue this agent may take (its own in_progress issue whose
// holder is dead, a killed process's, comes back this way too: rule L1/L3),
// so agents never race each other for the same issue. It returns nil, "",
// nil when two looks in a row, IdlePause apart, found nothing to claim and
// no issue of ours is still held by a live run (a killed process of this
// agent whose lease has not run out: the claim takes it once it has).
func (w *Worker) findClaim(ctx context.Context, rc *client.Client, run *clasp.Run) (*clasp.Issue, string, error) {
	empty := 0
	waiting := map[string]bool{}
	for ctx.Err() == nil {
		var iss *clasp.Issue
		// A retry after a lost answer may leave the issue the lost claim
		// took held by this run (a claim never answers what the run
		// holds); finishing the run releases it, and it comes back to this
		// agent as in_progress and its own.
		err := w.retry(ctx, func() error {
			var err error
			iss, err = rc.Claim(ctx, client.ClaimRequest{Scope: "any", ExpectedStatuses: []clasp.IssueStatus{clasp.IssueTodo}})
			return err
		})
		switch {
		case ctx.Err() != nil:
			return nil, "", nil
		case err != nil:
			return nil, "", fmt.Errorf("claim: %w", err)
		case iss != nil:
			return iss, "claim", nil
		}
		var inbox []*clasp.InboxItem
		if err := w.retry(ctx, func() error {
			var err error
			inbox, err = rc.Inbox(ctx)
			return err
		}); err != nil {
			return nil, "", fmt.Errorf("read inbox: %w", err)
		}
		held := false
		for _, it := range inbox {
			// An issue of ours whose blockers are not all done yet is
			// work to come: wait for it as for one a dead run holds.
			blocked := it.Status == clasp.IssueTodo && !it.DependencyReady
			if blocked || (it.Status == clasp.IssueInProgress && it.ActiveRun != nil && it.ActiveRun.ID != run.ID) {
				held = true
				if !waiting[it.ID] {
					waiting[it.ID] = true
					w.ev.Emit(EventWaiting, "issue", it.Identifier, "run", run.ID)
				}
			}
		}
		if held {
			empty = 0
		} else if empty++; empty >= 2 {
			return nil, "", nil
		}
		if !sleepCtx(ctx, w.cfg.IdlePause) {
			return nil, "", nil
		}
	}
	return nil, "", nil
}

// find looks for an issue and checks it out with rc's run. It returns nil,
// "", nil when two looks in a row, IdlePause apart, found nothing to do.
//
// The inbox comes first: an in_progress issue assigned to this agent is one
// a killed process of the agent held, and checkout adopts it (rule L1:
// in_progress and assigned to A; L3 when the dead run still holds the
// lock). While the dead run's lease runs the answer is 409
// held_by_live_run (the inbox shows it as the item's activeRun); the worker
// then does todo work first and, when there is none, waits the lease out
// with CheckoutWithRetry.
func (w *Worker) find(ctx context.Context, rc *client.Client, run *clasp.Run) (*clasp.Issue, string, error) {
	ttl := leaseTTL(run)
	want := client.CheckoutRequest{AgentID: w.me.ID, ExpectedStatuses: []clasp.IssueStatus{clasp.IssueTodo}}
	empty := 0
	for ctx.Err() == nil {
		var inbox []*clasp.InboxItem
		if err := w.retry(ctx, func() error {
			var err error
			inbox, err = rc.Inbox(ctx)
			return err
		}); err != nil {
			return nil, "", fmt.Errorf("read inbox: %w", err)
		}
		var mine, held []*clasp.InboxItem
		for _, it := range inbox {
			if it.Status == clasp.IssueTodo || it.Status == clasp.IssueInProgress {
				mine = append(mine, it)
			}
		}
		for _, it := range mine {
			if it.ActiveRun != nil && it.ActiveRun.ID != run.ID {
				// Held by a live run: a killed process of ours whose
				// lease has not run out. Work elsewhere meanwhile.
				held = append(held, it)
				continue
			}
			var iss *clasp.Issue
			err := w.retry(ctx, func() error {
				var err error
				iss, err = rc.IssueCheckout(ctx, it.ID, want)
				return err
			})
			if err == nil {
				return iss, "inbox", nil
			}
			if e := clasp.AsError(err); e != nil && e.Code == clasp.CodeCheckoutConflict && e.Details["reason"] == clasp.ReasonHeldByLiveRun {
				held = append(held, it)
			}
			if stop, err := w.checkoutFailed(ctx, it.Identifier, run.ID, err); stop {
				return nil, "", err
			}
		}

		iss, seen, err := w.findTodo(ctx, rc, run)
		if err != nil || iss != nil {
			return iss, "todo", err
		}

		for _, it := range held {
			w.ev.Emit(EventWaiting, "issue", it.Identifier, "run", run.ID)
			cctx, cancel := context.WithTimeout(ctx, ttl+time.Second)
			iss, err := rc.CheckoutWithRetry(cctx, it.ID, want, client.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond})
			cancel()
			if err == nil {
				return iss, "inbox", nil
			}
			if stop, err := w.checkoutFailed(ctx, it.Identifier, run.ID, err); stop {
				return nil, "", err
			}
		}

		if len(mine) > 0 || seen {
			empty = 0
		} else if empty++; empty >= 2 {
			return nil, "", nil
		}
		if !sleepCtx(ctx, w.cfg.IdlePause) {
			return nil, "", nil
		}
	}
	return nil, "", nil
}

// checkoutFailed records a failed checkout: a 409 checkout_conflict is
// counted and printed. stop is true when the look for work must end: ctx
// ended (err nil), or our own run is gone (err says so).
func (w *Worker) checkoutFailed(ctx context.Context, issue, run string, err error) (stop bool, _ error) {
	switch {
	case ctx.Err() != nil:
		return true, nil
	case clasp.ErrorCode(err) == clasp.CodeCheckoutConflict:
		w.conflict(issue, run, err)
	case clasp.ErrorCode(err) == clasp.CodeBlockedByUnresolved:
		// Its blockers are not all done: it comes back later.
	case runGone(err):
		return true, err
	default:
		w.log.Warn("checkout failed", "issue", issue, "err", err)
	}
	return false, nil
}

// findTodo tries the unassigned (or ours) todo issues of the first page in
// random order until a checkout succeeds. seen reports whether there was
// any candidate at all.
func (w *Worker) findTodo(ctx context.Context, rc *client.Client, run *clasp.Run) (iss *clasp.Issue, seen bool, err error) {
	var page *client.Page[*clasp.Issue]
	if err := w.retry(ctx, func() error {
		var err error
		page, err = rc.IssueList(ctx, w.me.CompanyID, client.IssueListParams{Statuses: []clasp.IssueStatus{clasp.IssueTodo}, Ready: true, Limit: 100})
		return err
	}); err != nil {
		return nil, false, fmt.Errorf("list todo issues: %w", err)
	}
	var cands []*clasp.Issue
	for _, it := range page.Items {
		if it.AssigneeAgentID == nil || *it.AssigneeAgentID == w.me.ID {
			cands = append(cands, it)
		}
	}
	rand.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	for _, it := range cands {
		if ctx.Err() != nil {
			return nil, true, nil
		}
		var got *clasp.Issue
		err := w.retry(ctx, func() error {
			var err error
			// A retry after a lost answer is safe: the same run checking
			// out again is idempotent (rule L2).
			got, err = rc.IssueCheckout(ctx, it.ID, client.CheckoutRequest{
				AgentID: w.me.ID, ExpectedStatuses: []clasp.IssueStatus{clasp.IssueTodo},
			})
			return err
		})
		if err == nil {
			return got, true, nil
		}
		if stop, err := w.checkoutFailed(ctx, it.Identifier, run.ID, err); stop {
			return nil, true, err
		}
	}
	return nil, len(cands) > 0, nil
}

func (w *Worker) conflict(issue, run string, err error) {
	w.conflicts++
	reason := ""
	if e := clasp.AsError(err); e != nil {
		reason, _ = e.Details["reason"].(string)
		if reason == "" {
			reason = e.Code
		}
	}
	w.ev.Emit(EventConflict, "issue", issue, "run", run, "reason", reason)
}

// work hashes the issue's file (the heartbeat still running), then writes
// the result and finishes the run. When the file cannot be read the issue
// is set blocked instead, with a FailurePrefix comment, and the run
// finished failed. It returns nil whether the issue ended done, blocked or
// was lost to a takeover; an error only when the server cannot be reached
// for good. ctx ends only when the run is lost.
func (w *Worker) work(ctx context.Context, rc *client.Client, run *clasp.Run, iss *clasp.Issue, stopHeartbeat func()) error {
	var sum string
	var herr error
	if w.cfg.GitRemote != "" {
		// A holder that pushes to a shared repository does not ask whether
		// it still holds the issue before pushing: the repository's gate
		// is the fence (a holder swept while it was frozen pushes when it
		// wakes, and the gate refuses it).
		ctx = context.WithoutCancel(ctx)
	}
	if strings.HasPrefix(iss.Description, DirPrefix) {
		sum, herr = dirWork(ctx, rc, iss, w.cfg.Slow) // a directory of a dependency swarm
	} else {
		sum, herr = HashFile(ctx, iss.Description, w.cfg.Slow)
	}
	if lost := context.Cause(ctx); lost != nil {
		stopHeartbeat()
		w.ev.Emit(EventRunLost, "issue", iss.Identifier, "run", run.ID, "error", lost)
		return nil
	}
	// From here on the calls must not be cut short: a PATCH cancelled
	// client-side may still commit.
	ctx = context.WithoutCancel(ctx)
	mergeWT := ""
	if herr == nil && w.cfg.GitDir != "" {
		// The result goes into the hold's own worktree, committed with the
		// stamp, before the issue is done (a gate accepts the commit while
		// this run holds the issue at its epoch, and after it is completed
		// under that epoch).
		wt, commit, gerr := w.commitResult(ctx, iss, ResultPrefix+sum)
		if gerr != nil {
			herr = &gitWorkError{step: "commit the result in its worktree", err: gerr}
		} else {
			w.ev.Emit(EventCommitted, "issue", iss.Identifier, "run", run.ID, "epoch", iss.CheckoutEpoch, "commit", commit, "worktree", wt)
			mergeWT = wt
		}
		if gerr == nil && w.cfg.GitRemote != "" {
			ws := workspaceOf(iss)
			refused, perr := w.pushBranch(ctx, wt, ws)
			switch {
			case perr != nil:
				herr = &gitWorkError{step: "push the result's branch " + ws.Branch, err: perr}
			case refused != "":
				// The repository's gate refused the hold's work: the issue
				// was taken over (or its holder, this run, was swept). The
				// work is dropped, as for a lock taken over.
				stopHeartbeat()
				w.ev.Emit(EventPushRefused, "issue", iss.Identifier, "run", run.ID, "epoch", iss.CheckoutEpoch, "ref", ws.Branch, "reason", refused)
				w.finish(ctx, rc, run.ID, clasp.RunFailed, "the repository refused the push of "+ws.Branch+": "+refused)
				return nil
			default:
				w.ev.Emit(EventPushed, "issue", iss.Identifier, "run", run.ID, "epoch", iss.CheckoutEpoch, "ref", ws.Branch, "commit", commit)
			}
		}
	}
	status, result, kind := clasp.IssueDone, ResultPrefix+sum, "done-"
	if herr != nil {
		// Work that failed never marks the issue done: it goes to blocked
		// with a comment saying why, in one PATCH that also releases the
		// lock (rule L6), so a human sees it and no agent takes it again
		// (claims take todo issues only).
		herr = workFailure(iss, herr)
		w.log.Warn("the work failed; setting the issue blocked", "issue", iss.Identifier, "err", herr)
		status, result, kind = clasp.IssueBlocked, FailurePrefix+herr.Error(), "blocked-"
	}

	// The result comment and status done go in ONE PATCH: the server writes
	// the comment in the same transaction as the status change (an issue
	// PATCH with a comment is one transaction), so a SIGKILL at any moment leaves either both or neither.
	// That is what makes "exactly one result comment per issue" hold
	// however the swarm kills us: a replacement that adopts the issue finds
	// it without a result and writes its own; a process killed after the
	// commit leaves a done issue nobody works again.
	//
	// An attempt that got no answer may still commit (its replica was
	// killed after sending the statement), even after we looked and saw
	// the issue not done yet; a second PATCH of the then done, unlocked
	// issue would add a second comment (rule L5 lets any agent of the
	// company write it). So every attempt carries the same Idempotency-Key,
	// stable across the retries of this run's result for this issue: the
	// server applies the PATCH once and answers a repeat with the issue as
	// it is now, writing nothing (RULES.md, Errors and requests).
	dctx := client.WithIdempotencyKey(ctx, kind+run.ID+"-"+iss.ID)
	err := w.retry(ctx, func() error {
		_, err := rc.IssueUpdate(dctx, iss.ID, client.IssueUpdateRequest{Status: &status, Comment: &result})
		return err
	})
	var lockErr error
	switch code := clasp.ErrorCode(err); {
	case err == nil:
	case code == clasp.CodeOwnershipConflict || code == clasp.CodeRunNotLive || code == clasp.CodeUnauthenticated || code == clasp.CodeCheckoutConflict:
		// The lock was taken over (our run was swept and another run
		// adopted the issue): never retry the write (rule L6: a late call
		// changes nothing and gets 409).
		lockErr = err
	default:
		return fmt.Errorf("write result of %s: %w", iss.Identifier, err)
	}
	stopHeartbeat()
	if lockErr != nil {
		w.ev.Emit(EventLockLost, "issue", iss.Identifier, "run", run.ID, "code", clasp.ErrorCode(lockErr))
		w.finish(ctx, rc, run.ID, clasp.RunFailed, "lock taken over: "+lockErr.Error())
		return nil
	}
	if herr != nil {
		w.blocked = append(w.blocked, iss.Identifier)
		w.ev.Emit(EventBlocked, "issue", iss.Identifier, "run", run.ID, "error", herr)
		w.finish(ctx, rc, run.ID, clasp.RunFailed, "work on "+iss.Identifier+" failed, so the issue is left blocked: "+herr.Error())
		return nil
	}
	w.done++
	w.ev.Emit(EventDone, "issue", iss.Identifier, "run", run.ID, "epoch", iss.CheckoutEpoch, "sha256", strings.TrimPrefix(result, ResultPrefix))
	w.finish(ctx, rc, run.ID, clasp.RunSucceeded, "")
	if w.cfg.GitRemote != "" && mergeWT != "" {
		// Completed work goes to the main branch after the issue is done:
		// the gate accepts a stamp completed under its epoch, and only the
		// completing hold's commit can get there.
		commit, tries, refused, err := w.mergeMain(ctx, mergeWT, iss)
		switch {
		case err != nil:
			w.ev.Emit(EventMergeFailed, "issue", iss.Identifier, "error", err)
		case refused != "":
			w.ev.Emit(EventPushRefused, "issue", iss.Identifier, "run", run.ID, "epoch", iss.CheckoutEpoch, "ref", w.mainBranch(), "reason", refused)
		default:
			w.ev.Emit(EventMerged, "issue", iss.Identifier, "run", run.ID, "epoch", iss.CheckoutEpoch, "commit", commit, "tries", tries)
		}
	}
	return nil
}

// workFailure says, as a sentence, why the work on iss failed with err,
// and what to do. A failure of the git work (a gitWorkError: the
// worktree, the commit or the push) names that step and git's complaint,
// and says to fix the repository and set the issue back to todo; any
// other failure is of hashing the file the description names: put a
// readable file's path in the description and set the issue back to todo.
func workFailure(iss *clasp.Issue, err error) error {
	if ge := (*gitWorkError)(nil); errors.As(err, &ge) {
		return fmt.Errorf("%v; fix the git repository and set the status back to todo (clasp issue update %s --status todo)", ge, iss.Identifier)
	}
	fix := fmt.Sprintf("set the description to the path of a readable file and the status back to todo (clasp issue update %s --description PATH --status todo)", iss.Identifier)
	if strings.TrimSpace(iss.Description) == "" {
		return fmt.Errorf("the description names no file to hash (clasp agent work hashes the file whose path is the description); %s", fix)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe
	}
	return fmt.Errorf("cannot read the file the description names (%v); %s", err, fix)
}

// finish ends run with status; a run that already ended (swept) is fine.
func (w *Worker) finish(ctx context.Context, rc *client.Client, runID string, status clasp.RunStatus, why string) {
	req := client.RunFinishRequest{Status: status}
	if why != "" {
		req.Error = &why
	}
	err := w.retry(ctx, func() error {
		_, err := rc.RunFinish(ctx, runID, req)
		return err
	})
	if err != nil && clasp.AsError(err) == nil {
		w.log.Warn("finish run failed", "run", runID, "err", err)
	}
	w.ev.Emit(EventRunClosed, "run", runID, "status", status, "code", clasp.ErrorCode(err))
}

// retry calls f until it returns anything but a connection error (no HTTP
// answer), waiting with jittered backoff, for at most ConnRetry.
func (w *Worker) retry(ctx context.Context, f func() error) error {
	b := client.Backoff{Initial: 50 * time.Millisecond, Max: 2 * time.Second}
	deadline := time.Now().Add(w.cfg.ConnRetry)
	for n := 0; ; n++ {
		err := f()
		if err == nil || clasp.AsError(err) != nil || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		w.log.Warn("server unreachable, retrying", "err", err)
		if !sleepCtx(ctx, b.Delay(n)) {
			return err
		}
	}
}

// liveRunsWait is how long a worker at its agent's live-run limit waits
// for runs to end before it gives up opening one: a few leases.
const liveRunsWait = 2 * time.Minute

// retryAfter reports whether err is a 429 rate_limited, and how long it
// says to wait (details.retryAfterSeconds, 1 s when it says nothing, at
// most 10 s so that a place freed sooner is taken soon).
func retryAfter(err error) (time.Duration, bool) {
	ce := clasp.AsError(err)
	if ce == nil || ce.Code != clasp.CodeRateLimited {
		return 0, false
	}
	secs, _ := ce.Details["retryAfterSeconds"].(float64)
	return min(max(time.Duration(secs*float64(time.Second)), time.Second), 10*time.Second), true
}

// runGone reports whether err says the calling run is no longer live: 409
// run_not_live with an agent key and run header, 401 with its run token.
func runGone(err error) bool {
	code := clasp.ErrorCode(err)
	return err != nil && (code == clasp.CodeRunNotLive || code == clasp.CodeUnauthenticated)
}

// leaseTTL is the lease TTL the server grants, read off a fresh run (its
// lease minus its last sign of life); 3 s if the run does not say.
func leaseTTL(r *clasp.Run) time.Duration {
	if r.LeaseExpiresAt != nil {
		from := r.StartedAt
		if r.LastSignOfLifeAt != nil {
			from = r.LastSignOfLifeAt
		}
		if from != nil {
			if d := r.LeaseExpiresAt.Sub(*from); d > 0 {
				return d
			}
		}
	}
	return 3 * time.Second
}

// sleepCtx waits d; false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
