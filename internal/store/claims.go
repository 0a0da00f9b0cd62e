package store

// Claim-next (rules L1 and L3; RULES.md, Claim) written once for every
// dialect: validation, the in-process queue of the claims of unassigned
// issues and its batches, the retry of a claim that saw an eligible issue
// held locked, and the explanation of a claim that took nothing. A
// dialect's ClaimDriver runs one try of the claim's statements and
// answers a ClaimAnswer; it decides nothing, since the statements' WHERE
// clauses are the decision.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/clasp-dev/clasp"
)

// ClaimRequest is one try of a claim as its statements take it: the
// agent's run Actor.RunID claims, within Actor.CompanyID, an unassigned
// issue with a status of Unassigned or one of its agent's with a status of
// Mine (an empty list leaves that side out), as ValidateClaim returns
// them; Expected are the statuses a checkout of the pick expects. Look
// asks a try that takes nothing whether an eligible issue is visible that
// other statements hold locked (ClaimAnswer.Seen).
type ClaimRequest struct {
	Actor                      Actor
	Unassigned, Mine, Expected []string
	Look                       bool
}

// ClaimAnswer is what one try of a claim answers, in every dialect: the
// issue taken (nil: none) and, when it displaced a dead holder (L3), why
// ("terminal", "lost" or "missing"; "" otherwise). Seen, when none was
// taken and the request asked (Look), says that an eligible issue is
// visible that other statements hold locked, so a later try may take it.
type ClaimAnswer struct {
	Issue      *clasp.Issue
	AdoptedWhy string
	Seen       bool
}

// ClaimDriver is what a dialect implements for claim-next.
type ClaimDriver interface {
	Driver
	// IssueClaim is ONE try of claim-next under L1 and L3 for request r:
	// the most urgent eligible issue is checked out for the caller's run,
	// with issue.checked_out (and issue.checkout_lock_adopted when a dead
	// holder is displaced, L3) in the same transaction. It takes nothing
	// when no issue is eligible or the caller's run is not live (the
	// caller explains which). Errors: the translated error of the
	// database.
	IssueClaim(ctx context.Context, r *ClaimRequest) (*ClaimAnswer, error)
}

// ClaimBatcher is what a ClaimDriver implements, besides, when concurrent
// claims of one company's unassigned issues are worth running as one
// statement (a driver whose writes are serialised anyway does not).
type ClaimBatcher interface {
	// IssueClaimBatch claims, in one statement and one transaction, an
	// unassigned issue of companyID with a status of unassigned for each
	// agent run of actors (at most ClaimBatchMax), in their order: each
	// one served gets an issue eligible for its run under L1 and L3, with
	// the activity rows IssueClaim writes, carrying its actor; those
	// served get the unlocked eligible issues in claim order (priority,
	// then age), none twice. Answer i is actor i's, nil when the batch
	// did not serve it (its run not live, nothing left for it, or an
	// issue naming its own run): that actor's claim runs IssueClaim
	// itself. Errors: the translated error of the database, every actor's.
	IssueClaimBatch(ctx context.Context, companyID string, unassigned []string, actors []Actor) ([]*ClaimAnswer, error)
}

// ClaimSeenTries bounds the tries of one claim whose eligible issues stay
// locked by other statements; claimSeenPause is the first pause between
// two (then 2, 4, 8, 16, and 32 times it for the rest: 0.35 s of pauses in
// all before the claim answers none).
const (
	ClaimSeenTries = 16
	claimSeenPause = time.Millisecond
)

// ClaimBatchMax bounds the calls one batch serves; more waiting calls
// form the next batch. A batch statement may repeat it as a constant (a
// dialect's test checks that the two agree).
const ClaimBatchMax = 64

// claimBatchBound bounds a batch when a call in it has no deadline of its
// own.
const claimBatchBound = time.Minute

// Claims implements Store.IssueClaim on a dialect's ClaimDriver. A
// dialect's Store embeds it (NewClaims). Safe for concurrent use.
type Claims struct {
	d    ClaimDriver
	b    ClaimBatcher  // nil: claims never queue
	q    claimQueues   // this process's claims of unassigned issues, batched behind the one running
	seen func(try int) // tests only (SetSeenHook)
}

// NewClaims returns claim-next running on d, batching the claims of
// unassigned issues when d is a ClaimBatcher.
func NewClaims(d ClaimDriver) *Claims {
	b, _ := d.(ClaimBatcher)
	return &Claims{d: d, b: b}
}

// SetSeenHook makes f be called, for tests, each time a try of a claim
// took nothing but saw an eligible issue held locked (with the try's
// number, from 1), before the pause. Call it before any claim.
func (c *Claims) SetSeenHook(f func(try int)) { c.seen = f }

// IssueClaim is claim-next (IssueClaimParams): the most urgent issue that
// run Actor.RunID may check out under L1 is checked out for it, with
// issue.checked_out (and issue.checkout_lock_adopted when a dead holder is
// displaced, L3: p.Result.AdoptedWhy says why). It answers the issue after
// the write, or (nil, nil) when no issue is eligible. Errors: those of
// ValidateClaim, and the caller's run problems (RunState.CallerProblem).
//
// A try that takes nothing but sees an eligible issue held locked (a
// concurrent claimer holds the first eligible row of each status it
// walks) runs again after a short pause (claimSeenPause, doubling, up to
// ClaimSeenTries tries in all, or ctx's end): nothing is answered while an
// issue is eligible, short of that bound.
//
// With a ClaimBatcher, a claim of unassigned issues only goes through this
// process's queue of such claims for its company and statuses: with none
// in flight it runs at once; claims arriving while one is in flight wait,
// and when it ends up to ClaimBatchMax of them run as one batch
// (IssueClaimBatch). A call the batch does not serve runs its own claim,
// so its answer (an issue, none, or its run problem) is exactly the single
// claim's. A caller whose ctx ends while it waits leaves the queue
// unclaimed for; once its batch runs it gets the batch's answer.
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
// caller's run problem (CallerRunRead, RunState.CallerProblem: a run's
// state only moves forward, so the read explains the claim) or an answer
// with no issue.
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

// claimQueues is the in-process queue of the claims of unassigned issues,
// by claimKey: a key is in the map while a claim of it is in flight, and
// waiting holds the calls that arrived since. The zero value is ready to
// use.
type claimQueues struct {
	mu sync.Mutex
	m  map[string]*claimQueue
}

// claimQueue is the waiting calls of one key, in order of arrival.
type claimQueue struct {
	waiting []*claimCall
}

// claimCall is one waiting claim: its request and context (for the
// batch's deadline), and once done is closed, its answer: ans, or err, or
// again (not served by the batch: run the claim on its own).
type claimCall struct {
	ctx   context.Context
	r     *ClaimRequest
	taken bool // in a batch (under claimQueues.mu): it is claimed for
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

// enter makes a claim of key: lead is true when nothing of key was in
// flight (the caller runs its claim now and calls Claims.next after it);
// otherwise the call x waits in the queue.
func (cq *claimQueues) enter(ctx context.Context, key string, r *ClaimRequest) (x *claimCall, lead bool) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	k, busy := cq.m[key]
	if !busy {
		if cq.m == nil {
			cq.m = map[string]*claimQueue{}
		}
		cq.m[key] = &claimQueue{}
		return nil, true
	}
	x = &claimCall{ctx: ctx, r: r, done: make(chan struct{})}
	k.waiting = append(k.waiting, x)
	return x, false
}

// leave takes x out of key's queue if no batch has taken it yet and
// reports whether it did.
func (cq *claimQueues) leave(key string, x *claimCall) bool {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if x.taken {
		return false
	}
	if k := cq.m[key]; k != nil {
		if i := slices.Index(k.waiting, x); i >= 0 {
			k.waiting = slices.Delete(k.waiting, i, i+1)
		}
	}
	return true
}

// next ends what was in flight for key: it returns the next batch (up to
// ClaimBatchMax waiting calls, oldest first, now taken), or nil and the
// key is idle again.
func (cq *claimQueues) next(key string) []*claimCall {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	k := cq.m[key]
	if k == nil {
		return nil
	}
	if len(k.waiting) == 0 {
		delete(cq.m, key)
		return nil
	}
	n := min(len(k.waiting), ClaimBatchMax)
	b := slices.Clone(k.waiting[:n])
	k.waiting = slices.Delete(k.waiting, 0, n)
	for _, x := range b {
		x.taken = true
	}
	return b
}

// waiting returns how many calls wait in key's queue now.
func (cq *claimQueues) waiting(key string) int {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if k := cq.m[key]; k != nil {
		return len(k.waiting)
	}
	return 0
}

// Hold enters the queue of the claims of unassigned issues with statuses
// unassigned in companyID as a claim in flight does, for tests: such
// claims wait until release, which runs them as batches. waiting is how
// many calls wait in the queue now. Error: the queue is in use already.
func (c *Claims) Hold(companyID string, unassigned []string) (waiting func() int, release func(), err error) {
	key := claimKey(companyID, unassigned)
	cq := &c.q
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if _, busy := cq.m[key]; busy {
		return nil, nil, fmt.Errorf("test hook: the claim queue of company %s, statuses %v, is in use", companyID, unassigned)
	}
	if cq.m == nil {
		cq.m = map[string]*claimQueue{}
	}
	cq.m[key] = &claimQueue{}
	return func() int { return cq.waiting(key) }, func() { c.next(key, companyID, unassigned) }, nil
}

// queued is claim r (of unassigned issues only) through the queue (see
// IssueClaim): the batch's answer, or one's.
func (c *Claims) queued(ctx context.Context, r *ClaimRequest) (*ClaimAnswer, error) {
	key := claimKey(r.Actor.CompanyID, r.Unassigned)
	x, lead := c.q.enter(ctx, key, r)
	if lead {
		ans, err := c.one(ctx, r)
		c.next(key, r.Actor.CompanyID, r.Unassigned)
		return ans, err
	}
	select {
	case <-x.done:
	case <-ctx.Done():
		if c.q.leave(key, x) {
			return nil, ctx.Err()
		}
		<-x.done // taken: the batch, bounded, answers it
	}
	if x.again {
		return c.one(ctx, r)
	}
	return x.ans, x.err
}

// next runs, in a goroutine of its own, the batches of key that wait, one
// after the other, until the queue is empty.
func (c *Claims) next(key, companyID string, unassigned []string) {
	b := c.q.next(key)
	if b == nil {
		return
	}
	go func() {
		for ; b != nil; b = c.q.next(key) {
			c.batch(b, companyID, unassigned)
		}
	}()
}

// batch answers the calls of batch b (claims of unassigned issues with
// statuses unassigned in companyID) and closes their done: one call on its
// own (one), several by IssueClaimBatch (again for those it did not
// serve). The batch runs under a context no call can cancel, bounded by
// the latest deadline of the calls (claimBatchBound from now when one has
// none); its error is every call's.
func (c *Claims) batch(b []*claimCall, companyID string, unassigned []string) {
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
	got, err := c.b.IssueClaimBatch(ctx, companyID, unassigned, actors)
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
