package crashtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// Parameters of the S28 load.
const (
	s28Clients       = 8
	s28Issues        = 50
	s28Rounds        = 3 // kill and restart this many times
	s28DonePerRound  = 4 // at most this many PATCH done per round, so that work remains
	s28MinKillMillis = 300
	s28MaxKillMillis = 1500
)

// TestS28_KillServerMidLoad is scenario S28 on both stores: a real `clasp
// serve` process is killed with SIGKILL in the middle of a load of
// checkouts, releases and PATCHes to done (with a comment) from 8
// concurrent clients, after a random 300-1500 ms, then restarted on the
// same data; three times. After each restart every issue must satisfy L7
// (a checkout lock implies in_progress and equal lock columns;
// checkoutEpoch equals the issue.checked_out rows and never goes down),
// and every write the clients saw answered 200 must be in the database
// (see verifyS28). Runs get 5-minute leases, so that nothing but
// the clients' own calls moves a lock.
func TestS28_KillServerMidLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("runs and kills a real server; skipped with -short")
	}
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			args := append(serveArgs(t, backend, "clasp_s28"), "--lease-ttl", "5m")
			runS28(t, args)
		})
	}
}

func runS28(t *testing.T, args []string) {
	ctx := t.Context()
	log := &syncBuffer{}
	srv := startServer(t, args, log)
	if srv.BoardToken() == "" {
		t.Fatalf("the first start printed no board token")
	}

	hc := newHTTPClient()
	board := client.New(srv.URL(), client.WithToken(srv.BoardToken()), client.WithHTTPClient(hc))
	f := setUp(t, ctx, board, srv.URL(), hc, s28Clients, s28Issues)
	hc.CloseIdleConnections()

	issueIDs := make([]string, len(f.issues))
	for i, iss := range f.issues {
		issueIDs[i] = iss.ID
	}
	clients := make([]*s28Client, s28Clients)
	for i := range clients {
		clients[i] = &s28Client{
			n: i + 1, agentID: f.agents[i].ID, runID: f.runs[i].ID,
			// Half the clients use run tokens, half an API key plus the
			// run header (RULES.md, Actors and credentials): both paths must be durable.
			token: f.runs[i].RunToken, runHeader: i%2 == 1,
			held: map[string]int64{}, hist: map[string][]s28Step{},
		}
		if clients[i].runHeader {
			clients[i].token = f.keys[i]
		}
	}
	var doneSet sync.Map // issue id -> true once a done was acknowledged
	lastEpoch := map[string]int64{}

	for round := 1; round <= s28Rounds; round++ {
		hc := newHTTPClient()
		lctx, stopLoad := context.WithCancel(ctx)
		var budget atomic.Int32
		budget.Store(s28DonePerRound)
		var wg sync.WaitGroup
		for _, c := range clients {
			wg.Go(func() { c.load(lctx, srv.URL(), hc, round, issueIDs, &doneSet, &budget) })
		}
		killAfter := time.Duration(s28MinKillMillis+rand.IntN(s28MaxKillMillis-s28MinKillMillis+1)) * time.Millisecond
		time.Sleep(killAfter)
		pid := srv.PID()
		srv.Kill()
		stopLoad()
		wg.Wait()
		hc.CloseIdleConnections()

		acked, unknown := 0, 0
		for _, c := range clients {
			for _, steps := range c.hist {
				for _, s := range steps {
					if s.round != round {
						continue
					}
					if s.acked {
						acked++
					} else {
						unknown++
					}
				}
			}
		}
		t.Logf("round %d: SIGKILL of pid %d after %s; %d writes acknowledged, %d without an answer", round, pid, killAfter, acked, unknown)

		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err := srv.Restart(rctx)
		cancel()
		if err != nil {
			t.Fatalf("round %d: restart: %v", round, err)
		}
		vhc := newHTTPClient()
		vboard := client.New(srv.URL(), client.WithToken(srv.BoardToken()), client.WithHTTPClient(vhc))
		verifyS28(t, ctx, vboard, f.company.ID, clients, lastEpoch, round)
		vhc.CloseIdleConnections()
		for _, c := range clients {
			for _, e := range c.errs {
				t.Errorf("round %d: %s", round, e)
			}
			c.errs = nil
		}
		if t.Failed() {
			t.FailNow()
		}
	}

	total := 0
	for _, c := range clients {
		total += c.acked
	}
	if total == 0 {
		t.Errorf("no write was acknowledged in %d rounds: the load did not run", s28Rounds)
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := srv.Stop(sctx); err != nil {
		t.Errorf("stop server: %v", err)
	}
}

// Operations of the S28 load.
const (
	opCheckout = "checkout"
	opRelease  = "release"
	opDone     = "done"
)

// s28Step is one write a client sent: acknowledged (a 200 answer), or
// without an answer (the server died: it may or may not have committed).
// Writes answered with an error changed nothing and are not kept.
type s28Step struct {
	op      string
	acked   bool
	epoch   int64  // checkout: the epoch answered; release, done: the epoch of the hold it ended
	comment string // done: the comment body
	round   int
}

// s28Client is one agent with one live run, writing as fast as answers
// come. Between rounds its state carries over: the holds it knows of
// (held) and, per issue, every write it sent (hist).
type s28Client struct {
	n              int
	agentID, runID string
	token          string
	runHeader      bool             // token is an API key: send the run header
	held           map[string]int64 // issue id -> epoch, the holds this client knows it has
	hist           map[string][]s28Step
	acked          int
	errs           []string // answers no write of this load should get
}

// load writes until ctx ends or a write gets no answer (the server was
// killed): a checkout of a random issue not known to be done, or, half the
// time when it holds issues, a release of one (unassigning half the time,
// so that issues move between agents) or, rarely and within the round's
// budget, a PATCH to done with a comment.
func (c *s28Client) load(ctx context.Context, url string, hc *http.Client, round int, issues []string, doneSet *sync.Map, budget *atomic.Int32) {
	cl := client.New(url, client.WithToken(c.token), client.WithHTTPClient(hc), client.WithUserAgent(fmt.Sprintf("s28-client-%d", c.n)))
	if c.runHeader {
		cl = cl.WithRun(c.runID)
	}
	for ctx.Err() == nil {
		if len(c.held) > 0 && rand.IntN(2) == 0 {
			id := c.anyHeld()
			epoch := c.held[id]
			if rand.IntN(6) == 0 && budget.Add(-1) >= 0 {
				body := fmt.Sprintf("s28 result of client %d, round %d, epoch %d, %s", c.n, round, epoch, client.NewIdempotencyKey())
				done := clasp.IssueDone
				_, err := cl.IssueUpdate(ctx, id, client.IssueUpdateRequest{Status: &done, Comment: &body})
				if !c.record(id, s28Step{op: opDone, epoch: epoch, comment: body, round: round}, err) {
					return
				}
				if err == nil {
					doneSet.Store(id, true)
				}
				continue
			}
			_, err := cl.IssueRelease(ctx, id, client.ReleaseRequest{Unassign: rand.IntN(2) == 0})
			if !c.record(id, s28Step{op: opRelease, epoch: epoch, round: round}, err) {
				return
			}
			continue
		}
		id := issues[rand.IntN(len(issues))]
		if _, done := doneSet.Load(id); done {
			continue
		}
		iss, err := cl.IssueCheckout(ctx, id, client.CheckoutRequest{AgentID: c.agentID, ExpectedStatuses: []clasp.IssueStatus{clasp.IssueTodo}})
		st := s28Step{op: opCheckout, round: round}
		if err == nil {
			st.epoch = iss.CheckoutEpoch
			if iss.CheckoutRunID == nil || *iss.CheckoutRunID != c.runID || iss.Status != clasp.IssueInProgress {
				c.errs = append(c.errs, fmt.Sprintf("client %d: checkout of %s answered 200 with checkoutRunId %s, status %s; want %s, in_progress", c.n, iss.Identifier, str(iss.CheckoutRunID), iss.Status, c.runID))
			}
		}
		if !c.record(id, st, err) {
			return
		}
	}
}

// anyHeld returns one of the issues the client holds, at random.
func (c *s28Client) anyHeld() string {
	ids := make([]string, 0, len(c.held))
	for id := range c.held {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids[rand.IntN(len(ids))]
}

// record keeps the outcome of a write to issue id. It returns false when
// the write got no answer (the load must stop: the server is gone).
func (c *s28Client) record(id string, st s28Step, err error) bool {
	switch {
	case err == nil:
		st.acked = true
		c.acked++
		c.hist[id] = append(c.hist[id], st)
		if st.op == opCheckout {
			c.held[id] = st.epoch
		} else {
			delete(c.held, id)
		}
		return true
	case clasp.AsError(err) != nil:
		// The server answered an error: the write changed nothing. Only a
		// checkout may be refused (another client holds the issue, or it
		// is assigned to another agent, or done); this client's releases
		// and PATCHes concern issues it holds.
		if st.op != opCheckout || clasp.ErrorCode(err) != clasp.CodeCheckoutConflict {
			c.errs = append(c.errs, fmt.Sprintf("client %d: %s of issue %s (epoch %d): unexpected answer %v", c.n, st.op, id, st.epoch, err))
			delete(c.held, id)
		}
		return true
	default:
		// No answer: the write may or may not have committed. Forget the
		// hold; a later checkout of the same issue by this run finds out
		// (rule L2 answers 200 with the same epoch when it still holds it).
		c.hist[id] = append(c.hist[id], st)
		delete(c.held, id)
		return false
	}
}

// verifyS28 reads the company back through the API after a restart and
// checks, for every issue:
//
//   - L7: checkoutRunId set implies status in_progress and executionRunId
//     equal to it; checkoutEpoch equals the number of issue.checked_out
//     rows, the last of which carries that epoch (and the holder, when
//     locked); checkoutEpoch never went down since the previous check;
//
// and, for every write a client saw acknowledged:
//
//   - checkout at epoch E: an issue.checked_out row of the client's run
//     with epoch E exists and the row's checkoutEpoch >= E;
//   - release (and done) of the hold at epoch E: the lock change that
//     follows that issue.checked_out row is an issue.released naming the
//     client's run as the previous holder;
//   - done: status done, an issue.updated row to done in the client's run,
//     and the comment, written in the client's run;
//
// and, when the client's last acknowledged write to the issue was not
// followed by a write without an answer, that the row is exactly as it
// left it: a checkout at E still held by its run at epoch E, a release no
// longer held by its run, a done still done.
func verifyS28(t *testing.T, ctx context.Context, board *client.Client, companyID string, clients []*s28Client, lastEpoch map[string]int64, round int) {
	t.Helper()
	issues, err := allIssues(ctx, board, companyID)
	if err != nil {
		t.Fatalf("round %d: %v", round, err)
	}
	acts, err := allActivity(ctx, board, companyID, "")
	if err != nil {
		t.Fatalf("round %d: %v", round, err)
	}
	perIssue := map[string][]*clasp.Activity{}
	for _, a := range acts {
		if a.EntityType == "issue" {
			perIssue[a.EntityID] = append(perIssue[a.EntityID], a)
		}
	}
	errorf := func(iss *clasp.Issue, format string, args ...any) {
		t.Helper()
		t.Errorf("round %d: %s: %s", round, iss.Identifier, fmt.Sprintf(format, args...))
	}

	ids := make([]string, 0, len(issues))
	for id := range issues {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		iss := issues[id]
		if iss.CheckoutRunID != nil && (iss.Status != clasp.IssueInProgress || iss.ExecutionRunID == nil || *iss.ExecutionRunID != *iss.CheckoutRunID) {
			errorf(iss, "L7: checkoutRunId %s with status %s and executionRunId %s; want in_progress and executionRunId = checkoutRunId", str(iss.CheckoutRunID), iss.Status, str(iss.ExecutionRunID))
		}
		var outs []*clasp.Activity
		for _, a := range perIssue[id] {
			if a.Action == clasp.ActionIssueCheckedOut {
				outs = append(outs, a)
			}
		}
		if int64(len(outs)) != iss.CheckoutEpoch {
			errorf(iss, "L7: checkoutEpoch %d, but %d issue.checked_out rows", iss.CheckoutEpoch, len(outs))
		}
		if n := len(outs); n > 0 {
			last := outs[n-1]
			if e := detailsOf(last).CheckoutEpoch; e == nil || *e != iss.CheckoutEpoch {
				errorf(iss, "the last issue.checked_out row (%d) has epoch %v, the row %d", last.ID, e, iss.CheckoutEpoch)
			}
			if iss.CheckoutRunID != nil && runOf(last) != *iss.CheckoutRunID {
				errorf(iss, "held by run %s, but the last issue.checked_out row (%d) names run %s", *iss.CheckoutRunID, last.ID, runOf(last))
			}
		}
		if iss.CheckoutEpoch < lastEpoch[id] {
			errorf(iss, "L7: checkoutEpoch went down from %d to %d across a restart", lastEpoch[id], iss.CheckoutEpoch)
		}
		lastEpoch[id] = iss.CheckoutEpoch
	}

	// Comments of the issues some client saw set done.
	comments := map[string][]*clasp.Comment{}
	for _, c := range clients {
		for id, steps := range c.hist {
			for _, s := range steps {
				if s.acked && s.op == opDone && comments[id] == nil {
					cs, err := board.CommentList(ctx, id, client.CommentListParams{Limit: 1000})
					if err != nil {
						t.Fatalf("round %d: list comments: %v", round, err)
					}
					if cs == nil {
						cs = []*clasp.Comment{} // fetched: not again
					}
					comments[id] = cs
				}
			}
		}
	}

	checked := 0
	for _, c := range clients {
		for id, steps := range c.hist {
			iss := issues[id]
			if iss == nil {
				t.Errorf("round %d: issue %s, written by client %d, is gone", round, id, c.n)
				continue
			}
			rows := perIssue[id]
			// checkedOutRow finds the issue.checked_out row of c's run at epoch.
			checkedOutRow := func(epoch int64) *clasp.Activity {
				for _, a := range rows {
					if e := detailsOf(a).CheckoutEpoch; a.Action == clasp.ActionIssueCheckedOut && runOf(a) == c.runID && e != nil && *e == epoch {
						return a
					}
				}
				return nil
			}
			last := -1
			for i, s := range steps {
				if !s.acked {
					continue
				}
				last = i
				checked++
				switch s.op {
				case opCheckout:
					if checkedOutRow(s.epoch) == nil {
						errorf(iss, "client %d's checkout at epoch %d was acknowledged (round %d), but no issue.checked_out row of run %s has that epoch", c.n, s.epoch, s.round, c.runID)
					}
					if iss.CheckoutEpoch < s.epoch {
						errorf(iss, "client %d's checkout at epoch %d was acknowledged (round %d), but the row's checkoutEpoch is %d", c.n, s.epoch, s.round, iss.CheckoutEpoch)
					}
				case opRelease, opDone:
					out := checkedOutRow(s.epoch)
					if out == nil {
						errorf(iss, "client %d's %s of its hold at epoch %d was acknowledged (round %d), but that hold's issue.checked_out row is missing", c.n, s.op, s.epoch, s.round)
						continue
					}
					// The runs are live (long leases) and the board never
					// writes: the lock change after this hold's checkout
					// must be this release.
					next := nextLockChange(rows, out.ID)
					if next == nil || next.Action != clasp.ActionIssueReleased || detailsOf(next).PreviousCheckoutRunID != c.runID {
						errorf(iss, "client %d's %s of its hold at epoch %d was acknowledged (round %d), but the lock change after activity %d is %s, not an issue.released naming run %s", c.n, s.op, s.epoch, s.round, out.ID, describe(next), c.runID)
					}
					if s.op == opDone {
						verifyDone(iss, c, s, rows, comments[id], errorf)
					}
				}
			}
			if last < 0 {
				continue
			}
			answered := true
			for _, s := range steps[last+1:] {
				answered = answered && s.acked
			}
			if !answered {
				continue // a later write may have landed: the checks above are all that is certain
			}
			s := steps[last]
			switch s.op {
			case opCheckout:
				if str(iss.CheckoutRunID) != c.runID || iss.CheckoutEpoch != s.epoch || iss.Status != clasp.IssueInProgress {
					errorf(iss, "client %d's last write was a checkout at epoch %d (round %d), acknowledged, and its run %s is live; but the row has checkoutRunId %s, epoch %d, status %s", c.n, s.epoch, s.round, c.runID, str(iss.CheckoutRunID), iss.CheckoutEpoch, iss.Status)
				}
			case opRelease:
				if str(iss.CheckoutRunID) == c.runID {
					errorf(iss, "client %d's last write was a release (round %d), acknowledged, but its run %s still holds the issue", c.n, s.round, c.runID)
				}
			case opDone:
				if iss.Status != clasp.IssueDone {
					errorf(iss, "client %d's last write was a PATCH to done (round %d), acknowledged, but the status is %s", c.n, s.round, iss.Status)
				}
			}
		}
	}
	t.Logf("round %d: verified %d issues, %d activity rows, %d acknowledged writes", round, len(issues), len(acts), checked)
}

// lockActions are the activity actions that change an issue's locks.
var lockActions = map[string]bool{
	clasp.ActionIssueCheckedOut: true, clasp.ActionIssueLockAdopted: true, clasp.ActionIssueReleased: true,
	clasp.ActionIssueLockReleased: true, clasp.ActionIssueStaleLockCleared: true, clasp.ActionIssueForceRelease: true,
}

// nextLockChange returns the first lock-changing row of rows (oldest
// first) after activity id, or nil.
func nextLockChange(rows []*clasp.Activity, id int64) *clasp.Activity {
	for _, a := range rows {
		if a.ID > id && lockActions[a.Action] {
			return a
		}
	}
	return nil
}

// describe names an activity row for a message.
func describe(a *clasp.Activity) string {
	if a == nil {
		return "none"
	}
	return fmt.Sprintf("%s (activity %d, run %s, details %s)", a.Action, a.ID, runOf(a), a.Details)
}

// verifyDone checks an acknowledged PATCH to done: the issue is done, an
// issue.updated row to done was written in the client's run, and the
// comment exists, written in that run.
func verifyDone(iss *clasp.Issue, c *s28Client, s s28Step, rows []*clasp.Activity, comments []*clasp.Comment, errorf func(*clasp.Issue, string, ...any)) {
	if iss.Status != clasp.IssueDone {
		errorf(iss, "client %d's PATCH to done was acknowledged (round %d), but the status is %s", c.n, s.round, iss.Status)
	}
	updated := false
	for _, a := range rows {
		if a.Action == clasp.ActionIssueUpdated && statusTo(a) == string(clasp.IssueDone) && a.RunID != nil && *a.RunID == c.runID {
			updated = true
		}
	}
	if !updated {
		errorf(iss, "client %d's PATCH to done was acknowledged (round %d), but no issue.updated row to done in run %s", c.n, s.round, c.runID)
	}
	for _, cm := range comments {
		if cm.Body == s.comment {
			if cm.RunID == nil || *cm.RunID != c.runID {
				errorf(iss, "the comment of client %d's PATCH to done was written in run %s, want %s", c.n, str(cm.RunID), c.runID)
			}
			return
		}
	}
	errorf(iss, "client %d's PATCH to done was acknowledged (round %d), but its comment %q is missing", c.n, s.round, strings.TrimSpace(s.comment))
}
