package store

// Claim-next (L1, L3) written once for every dialect: validation, the
// queue and batches of claims, the retry policy and the explanation of a
// claim that took nothing. A dialect's Driver runs one try and decides
// nothing: the statements' WHERE clauses are the decision.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/clasp-dev/clasp"
)

// ClaimRequest is one try of a claim: agent run Actor.RunID claims, in
// Actor.CompanyID, an unassigned issue with a status of Unassigned or one
// of its agent's with a status of Mine (empty: that side left out), as
// ValidateClaim returns them; a checkout of the pick expects Expected.
// Look asks a try that takes nothing for ClaimAnswer.Seen.
type ClaimRequest struct {
	Actor                      Actor
	Unassigned, Mine, Expected []string
	Look                       bool
}

// ClaimAnswer is one try's answer in every dialect: the issue taken (nil:
// none) and why a dead holder was displaced (L3: "terminal", "lost" or
// "missing"; "" when none was). Seen (asked by Look; nothing taken): an
// eligible issue is visible that other statements hold locked.
type ClaimAnswer struct {
	Issue      *clasp.Issue
	AdoptedWhy string
	Seen       bool
}

// claimDriver is the part of Driver for claim-next.
type claimDriver interface {
	// IssueClaim is ONE try of claim-next for r under L1 and L3: the most
	// urgent eligible issue is checked out for the caller's run with its
	// activity rows (issue.checked_out, issue.checkout_lock_adopted), in
	// one transaction. Nothing is taken when none is eligible or the run
	// is not live. Errors: the translated error of the database.
	IssueClaim(ctx context.Context, r *ClaimRequest) (*ClaimAnswer, error)
}

// ClaimBatcher is what a Driver whose writes are not serialised
// anyway also implements, to run concurrent claims as one statement.
type ClaimBatcher interface {
	// IssueClaimBatch claims, in one transaction under L1 and L3 with
	// IssueClaim's activity rows, an unassigned issue of companyID with a
	// status of unassigned for each agent run of actors (at most
	// ClaimBatchMax): in actors' order, those served get the unlocked
	// eligible issues in claim order, none twice. Answer i is actor i's,
	// nil when not served (its run not live, nothing left, or an issue
	// naming its own run). Errors: the database's, translated.
	IssueClaimBatch(ctx context.Context, companyID string, unassigned []string, actors []Actor) ([]*ClaimAnswer, error)
}

// ClaimSeenTries bounds the tries of a claim whose eligible issues stay
// locked by other statements; claimSeenPause is the first pause between
// two (then 2, 4, 8, 16, and 32 times it: 0.35 s in all). ClaimBatchMax
// bounds the calls one batch serves (a batch statement may repeat it);
// claimBatchBound bounds a batch when a call in it has no deadline.
const (
	ClaimSeenTries  = 16
	claimSeenPause  = time.Millisecond
	ClaimBatchMax   = 64
	claimBatchBound = time.Minute
)

// Claims implements Store.IssueClaim on a dialect's Driver. A
// dialect's Store embeds it (NewClaims). Safe for concurrent use.
type Claims struct {
	d    Driver
	b    ClaimBatcher  // nil: claims never queue
	seen func(try int) // tests only (SetSeenHook)

	mu sync.Mutex
	// queues holds, by claimKey, this process's claims of unassigned
	// issues: a key is there while a claim of it is in flight, with the
	// calls that arrived since, in order.
	queues map[string][]*claimCall
}

// NewClaims returns claim-next running on d, batching the claims of
// unassigned issues when d is a ClaimBatcher.
func NewClaims(d Driver) *Claims {
	b, _ := d.(ClaimBatcher)
	return &Claims{d: d, b: b, queues: map[string][]*claimCall{}}
}

// SetSeenHook makes f be called, for tests, each time a try of a claim
// took nothing but saw an eligible issue held locked (with the try's
// number, from 1), before the pause. Call it before any claim.
func (c *Claims) SetSeenHook(f func(try int)) { c.seen = f }

// IssueClaim is claim-next (IssueClaimParams, L1): the most urgent issue
// run Actor.RunID may check out is checked out for it, with
// issue.checked_out (and issue.checkout_lock_adopted when a dead holder is
// displaced, L3: p.Result.AdoptedWhy says why). It answers the issue after
// the write, or (nil, nil) when no issue is eligible. Errors: those of
// ValidateClaim, and the caller's run problems (RunState.CallerProblem).
//
// A try that takes nothing but sees an eligible issue held locked runs
// again after a pause (claimSeenPause, doubling), up to ClaimSeenTries
// tries or ctx's end. With a ClaimBatcher, a claim of unassigned issues
// only goes through this process's queue of its company and statuses:
// with none in flight it runs at once; claims arriving meanwhile wait, and
// then up to ClaimBatchMax of them run as one batch. A call the batch does
// not serve runs on its own, so its answer is exactly a single claim's. A
// caller whose ctx ends while it waits leaves the queue unclaimed for;
// once its batch runs it gets the batch's answer.
func (c *Claims) IssueClaim(ctx context.Context, p *IssueClaimParams) (*clasp.Issue, error) {
	unassigned, mine, expected, err := ValidateClaim(p)
	if err != nil {
		return nil, err
	}
	r := &ClaimRequest{Actor: p.Actor, Unassigned: unassigned, Mine: mine, Expected: expected}
	var ans *ClaimAnswer
	if c.b == nil || len(mine) > 0 {
		ans, err = c.one(ctx, r)
	} else {
		ans, err = c.queued(ctx, r)
	}
	if err != nil || ans.Issue == nil {
		return nil, err
	}
	if ans.AdoptedWhy != "" && p.Result != nil { // L3
		p.Result.AdoptedWhy = ans.AdoptedWhy
	}
	return ans.Issue, nil
}

// one is claim r on its own: tries while one takes nothing but sees an
// eligible issue (see IssueClaim), then, when none took an issue, the
// caller's run problem (CallerRunRead: a run's state only moves forward,
// so the read explains the claim) or an answer with no issue.
func (c *Claims) one(ctx context.Context, r *ClaimRequest) (*ClaimAnswer, error) {
	for try := 1; ; try++ {
		r.Look = try < ClaimSeenTries
		ans, err := c.d.IssueClaim(ctx, r)
		if err != nil || ans.Issue != nil {
			return ans, err
		}
		if !ans.Seen {
			break
		}
		if c.seen != nil {
			c.seen(try)
		}
		t := time.NewTimer(claimSeenPause << min(try-1, 5))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, Wrap(ctx.Err(), "claim an issue")
		case <-t.C:
		}
	}
	a := r.Actor
	st, err := CallerRunRead(ctx, c.d, c.d.Read(), a.RunID)
	if err != nil {
		return nil, c.d.Translate(err)
	}
	if err := st.CallerProblem(a.RunID, a.AgentID, a.CompanyID); err != nil {
		return nil, err
	}
	return &ClaimAnswer{}, nil
}

// claimCall is one waiting claim (request r, ctx for the batch's
// deadline) and, once done is closed, its answer: ans, or err, or again
// (not served by the batch: run the claim on its own).
type claimCall struct {
	ctx   context.Context
	r     *ClaimRequest
	taken bool // in a batch (under Claims.mu): it is claimed for
	done  chan struct{}
	ans   *ClaimAnswer
	err   error
	again bool
}

// claimKey is the queue key of the claims of unassigned issues with
// statuses unassigned by agents of companyID.
func claimKey(companyID string, unassigned []string) string {
	return companyID + "\x00" + strings.Join(unassigned, ",")
}

// enter makes claim r of key: lead is true when nothing of key was in
// flight (the caller runs its claim now and calls drain after it);
// otherwise the call x waits in the queue (r nil: nothing waits).
func (c *Claims) enter(ctx context.Context, key string, r *ClaimRequest) (x *claimCall, lead bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, busy := c.queues[key]; busy {
		if r != nil {
			x = &claimCall{ctx: ctx, r: r, done: make(chan struct{})}
			c.queues[key] = append(w, x)
		}
		return x, false
	}
	c.queues[key] = nil
	return nil, true
}

// leave takes x out of key's queue if no batch has taken it yet and
// reports whether it did.
func (c *Claims) leave(key string, x *claimCall) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if x.taken {
		return false
	}
	c.queues[key] = slices.DeleteFunc(c.queues[key], func(y *claimCall) bool { return y == x }) // x waits: key is in flight
	return true
}

// take ends what was in flight for key: it returns the next batch (up to
// ClaimBatchMax waiting calls, oldest first, now taken), or nil and the
// key is idle again.
func (c *Claims) take(key string) []*claimCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.queues[key]
	if len(w) == 0 {
		delete(c.queues, key)
		return nil
	}
	b := slices.Clone(w[:min(len(w), ClaimBatchMax)])
	c.queues[key] = slices.Delete(w, 0, len(b))
	for _, x := range b {
		x.taken = true
	}
	return b
}

// Hold enters the queue of the claims of unassigned issues with statuses
// unassigned in companyID as a claim in flight does, for tests: such
// claims wait until release, which runs them as batches. waiting is how
// many calls wait in the queue now. Error: the queue is in use already.
func (c *Claims) Hold(companyID string, unassigned []string) (waiting func() int, release func(), err error) {
	key := claimKey(companyID, unassigned)
	if _, lead := c.enter(context.Background(), key, nil); !lead {
		return nil, nil, fmt.Errorf("test hook: the claim queue of company %s, statuses %v, is in use", companyID, unassigned)
	}
	waiting = func() int { c.mu.Lock(); defer c.mu.Unlock(); return len(c.queues[key]) }
	return waiting, func() { c.drain(key) }, nil
}

// queued is claim r (of unassigned issues only) through the queue (see
// IssueClaim): the batch's answer, or one's.
func (c *Claims) queued(ctx context.Context, r *ClaimRequest) (*ClaimAnswer, error) {
	key := claimKey(r.Actor.CompanyID, r.Unassigned)
	x, lead := c.enter(ctx, key, r)
	if lead {
		ans, err := c.one(ctx, r)
		c.drain(key)
		return ans, err
	}
	select {
	case <-x.done:
	case <-ctx.Done():
		if c.leave(key, x) {
			return nil, ctx.Err()
		}
		<-x.done // taken: the batch, bounded, answers it
	}
	if x.again {
		return c.one(ctx, r)
	}
	return x.ans, x.err
}

// drain runs, in a goroutine of its own, the batches of key that wait, one
// after the other, until the queue is empty.
func (c *Claims) drain(key string) {
	if b := c.take(key); b != nil {
		go func() {
			for ; b != nil; b = c.take(key) {
				c.batch(b)
			}
		}()
	}
}

// batch answers the calls of batch b (claims of one queue) and closes
// their done: one call on its own (one), several by IssueClaimBatch (again
// for those it did not serve). The batch runs under a context no call can
// cancel, bounded by the latest deadline of the calls (claimBatchBound
// from now when one has none); its error is every call's.
func (c *Claims) batch(b []*claimCall) {
	defer func() {
		for _, x := range b {
			close(x.done)
		}
	}()
	deadline, bounded := time.Time{}, true
	for _, x := range b {
		d, ok := x.ctx.Deadline()
		bounded = bounded && ok
		if d.After(deadline) {
			deadline = d
		}
	}
	if !bounded {
		deadline = time.Now().Add(claimBatchBound)
	}
	ctx, cancel := context.WithDeadline(context.WithoutCancel(b[0].ctx), deadline)
	defer cancel()
	if len(b) == 1 {
		b[0].ans, b[0].err = c.one(ctx, b[0].r)
		return
	}
	actors := make([]Actor, len(b))
	for i, x := range b {
		actors[i] = x.r.Actor
	}
	got, err := c.b.IssueClaimBatch(ctx, b[0].r.Actor.CompanyID, b[0].r.Unassigned, actors)
	for i, x := range b {
		switch {
		case err != nil:
			x.err = err
		case i < len(got) && got[i] != nil:
			x.ans = got[i]
		default:
			x.again = true
		}
	}
}
