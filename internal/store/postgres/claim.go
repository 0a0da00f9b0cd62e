package postgres

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// IssueClaim is claim-next (store.IssueClaimParams): the most urgent issue
// that run Actor.RunID may check out under L1 is checked out for it in one
// statement, with issue.checked_out (and issue.checkout_lock_adopted when
// a dead holder is displaced, L3). It answers the issue after the write,
// or (nil, nil) when no issue is eligible. Errors: those of
// store.ValidateClaim, and the caller's run problems
// (store.LockState.CallerProblem).
//
// A claim with a scope that includes the agent's own issues runs
// statement Claim. A claim of unassigned issues only goes through this
// process's queue of such claims for its company and statuses
// (claimQueues): with none in flight it runs statement Claim at once;
// claims arriving while one is in flight wait, and when it ends up to
// claimBatchMax of them run as ONE statement (ClaimBatch, one
// transaction). The batch guarantees: each call it serves gets an issue
// eligible for its run under L1 and L3 at the statement's snapshot, with
// the activity rows Claim writes, carrying that call's actor, run and
// request; the calls served, in arrival order, get the unlocked eligible
// issues in claim order (priority, then age), as the same calls made one
// after the other would; no issue is given to two calls. A call the batch
// does not serve (its run not live, no eligible issue left for it, or an
// issue naming its own run, which only Claim decides) runs statement
// Claim itself, so its answer (an issue, 204, or its run problem) is
// exactly the single statement's. A caller whose ctx ends while it waits
// leaves the queue unclaimed for; once its batch runs it gets the batch's
// answer. Batches of several servers on one database are concurrent
// statements that skip each other's rows (SKIP LOCKED).
func (s *Driver) IssueClaim(ctx context.Context, p *store.IssueClaimParams) (*clasp.Issue, error) {
	unassigned, mine, _, err := store.ValidateClaim(p)
	if err != nil {
		return nil, err
	}
	var (
		iss *clasp.Issue
		why string
	)
	if len(mine) > 0 {
		iss, why, err = s.claimOne(ctx, p.Actor, unassigned, mine)
	} else {
		iss, why, err = s.claimQueued(ctx, p.Actor, unassigned)
	}
	if iss != nil && why != "" && p.Result != nil {
		p.Result.AdoptedWhy = why
	}
	return iss, err
}

// claimOne is claim-next for actor a by statement Claim (unassigned and
// mine as store.ValidateClaim returns them): the issue taken and the
// adoption reason (L3, "" when none), or nil and the caller's run problem
// (nil when the run is live and nothing was eligible).
//
// Claim skips rows other statements hold locked, and a concurrent claimer
// holds the first eligible row of each status it walks until it commits,
// though it takes one. So when Claim takes nothing, statement ClaimSeen
// reads (no locks) whether an eligible issue is visible; while one is,
// Claim runs again after a short pause (claimSeenPause, doubling, up to
// claimSeenTries runs in all, the locks in the way being those of
// statements in flight): nothing is answered while an issue is eligible,
// short of that bound or ctx's end.
func (s *Driver) claimOne(ctx context.Context, a store.Actor, unassigned, mine []string) (*clasp.Issue, string, error) {
	args := actorArgs(namedArgs{"run": a.RunID, "agent": a.AgentID, "unassigned": unassigned, "mine": mine}, a)
	seenArgs := namedArgs{"run": a.RunID, "agent": a.AgentID, "unassigned": unassigned, "mine": mine}
	var (
		iss   clasp.Issue
		why   string
		taken bool
	)
	for try := 1; ; try++ {
		err := s.retry(ctx, func() error {
			err := s.pool.QueryRow(ctx, q("Claim"), args).Scan(append(store.IssueDest(&iss), &why)...)
			taken = err == nil
			if errors.Is(err, pgx.ErrNoRows) {
				return nil // nothing taken: not an error to retry or translate
			}
			return err
		})
		if err != nil {
			return nil, "", wrap(err, "claim an issue")
		}
		if taken {
			return &iss, why, nil
		}
		if try == claimSeenTries {
			break
		}
		var seen bool
		if err := s.retryQuiet(ctx, func() error {
			return s.pool.QueryRow(ctx, q("ClaimSeen"), seenArgs).Scan(&seen)
		}); err != nil {
			return nil, "", wrap(err, "claim an issue")
		}
		if !seen {
			break
		}
		if s.claimSeen != nil {
			s.claimSeen(try)
		}
		t := time.NewTimer(claimSeenPause << min(try-1, 5))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, "", wrap(ctx.Err(), "claim an issue")
		case <-t.C:
		}
	}
	// Nothing taken: explain a caller's run that is not live, else none.
	r, err := callerRun(ctx, s.pool, a.RunID)
	if err != nil {
		return nil, "", err
	}
	return nil, "", r.CallerProblem(a.RunID, a.AgentID, a.CompanyID)
}

// claimSeenTries bounds the runs of statement Claim in one claim whose
// eligible issues stay locked by other statements; claimSeenPause is the
// first pause between two (then 2, 4, 8, 16, and 32 times it for the rest:
// 0.35 s of pauses in all before the claim answers none).
const (
	claimSeenTries = 16
	claimSeenPause = time.Millisecond
)

// claimBatchMax bounds the calls one ClaimBatch statement serves; more
// waiting calls form the next batch. Statement ClaimBatch repeats it as
// the constant LIMIT of its read of each status's range (a call past it
// would go unserved and run Claim itself); TestClaimBatchPlanUsesIndexes
// checks that the two agree.
const claimBatchMax = 64

// claimBatchBound bounds a batch statement when a call in it has no
// deadline of its own.
const claimBatchBound = time.Minute

// claimQueues is the store's in-process queue of the claims of unassigned
// issues, by claimKey: a key is in the map while a statement of it is in
// flight, and waiting holds the calls that arrived since. The zero value
// is ready to use.
type claimQueues struct {
	mu sync.Mutex
	m  map[string]*claimQueue
}

// claimQueue is the waiting calls of one key, in order of arrival.
type claimQueue struct {
	waiting []*claimCall
}

// claimCall is one waiting claim: its actor and context (for the batch's
// deadline), and once done is closed, its answer: the issue and adoption
// reason, or err, or again (not served by the batch: run Claim).
type claimCall struct {
	ctx   context.Context
	a     store.Actor
	taken bool // in a batch (under claimQueues.mu): it is claimed for
	done  chan struct{}

	iss   *clasp.Issue
	why   string
	err   error
	again bool
}

// claimKey is the queue key of the claims of unassigned issues with
// statuses unassigned by agents of companyID.
func claimKey(companyID string, unassigned []string) string {
	return companyID + "\x00" + strings.Join(unassigned, ",")
}

// enter makes a claim of key: lead is true when nothing of key was in
// flight (the caller runs its statement now and calls s.claimNext after
// it); otherwise the call c waits in the queue.
func (cq *claimQueues) enter(ctx context.Context, key string, a store.Actor) (c *claimCall, lead bool) {
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
	c = &claimCall{ctx: ctx, a: a, done: make(chan struct{})}
	k.waiting = append(k.waiting, c)
	return c, false
}

// leave takes c out of key's queue if no batch has taken it yet and
// reports whether it did.
func (cq *claimQueues) leave(key string, c *claimCall) bool {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if c.taken {
		return false
	}
	if k := cq.m[key]; k != nil {
		if i := slices.Index(k.waiting, c); i >= 0 {
			k.waiting = slices.Delete(k.waiting, i, i+1)
		}
	}
	return true
}

// next ends what was in flight for key: it returns the next batch (up to
// claimBatchMax waiting calls, oldest first, now taken), or nil and the
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
	n := min(len(k.waiting), claimBatchMax)
	b := slices.Clone(k.waiting[:n])
	k.waiting = slices.Delete(k.waiting, 0, n)
	for _, c := range b {
		c.taken = true
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

// claimQueued is claim-next of unassigned issues with statuses unassigned
// for actor a through the queue (see IssueClaim): the issue and adoption
// reason, or nil and claimOne's answer.
func (s *Driver) claimQueued(ctx context.Context, a store.Actor, unassigned []string) (*clasp.Issue, string, error) {
	key := claimKey(a.CompanyID, unassigned)
	c, lead := s.claims.enter(ctx, key, a)
	if lead {
		iss, why, err := s.claimOne(ctx, a, unassigned, []string{})
		s.claimNext(key, a.CompanyID, unassigned)
		return iss, why, err
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		if s.claims.leave(key, c) {
			return nil, "", ctx.Err()
		}
		<-c.done // taken: the batch, bounded, answers it
	}
	if c.again {
		return s.claimOne(ctx, a, unassigned, []string{})
	}
	return c.iss, c.why, c.err
}

// claimNext runs, in a goroutine of its own, the batches of key that
// wait, one after the other, until the queue is empty.
func (s *Driver) claimNext(key, companyID string, unassigned []string) {
	b := s.claims.next(key)
	if b == nil {
		return
	}
	go func() {
		for ; b != nil; b = s.claims.next(key) {
			s.claimBatch(b, companyID, unassigned)
		}
	}()
}

// claimBatch answers the calls of batch b (claims of unassigned issues with
// statuses unassigned in companyID) and closes their done: one call by
// statement Claim, several by statement ClaimBatch (again for those it
// did not serve). The statement runs under a context no call can cancel,
// bounded by the latest deadline of the calls (claimBatchBound from now
// when one has none); its error is every call's.
func (s *Driver) claimBatch(b []*claimCall, companyID string, unassigned []string) {
	defer func() {
		for _, c := range b {
			close(c.done)
		}
	}()
	deadline, bounded := time.Time{}, true
	for _, c := range b {
		d, ok := c.ctx.Deadline()
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
		c := b[0]
		c.iss, c.why, c.err = s.claimOne(ctx, c.a, unassigned, []string{})
		return
	}
	n := len(b)
	runs, agents, types, ids, actorRuns, requests := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i, c := range b {
		runs[i], agents[i], types[i], ids[i] = c.a.RunID, c.a.AgentID, string(c.a.Type), c.a.ID() // an agent (store.ValidateClaim)
		actorRuns[i], requests[i] = c.a.RunID, c.a.RequestID
	}
	args := namedArgs{"company": companyID, "unassigned": unassigned, "runs": runs, "agents": agents,
		"actor_types": types, "actor_ids": ids, "actor_runs": actorRuns, "actor_requests": requests}
	type served struct {
		ord int64
		iss *clasp.Issue
		why string
	}
	var got []served
	err := s.retry(ctx, func() error {
		got = got[:0]
		rows, err := s.pool.Query(ctx, q("ClaimBatch"), args)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			v := served{iss: new(clasp.Issue)}
			if err := rows.Scan(append(append([]any{&v.ord}, store.IssueDest(v.iss)...), &v.why)...); err != nil {
				return err
			}
			got = append(got, v)
		}
		return rows.Err()
	})
	if err != nil {
		err = wrap(err, "claim issues for %d calls", n)
		for _, c := range b {
			c.err = err
		}
		return
	}
	for _, c := range b {
		c.again = true
	}
	for _, v := range got {
		if v.ord >= 1 && v.ord <= int64(n) {
			c := b[v.ord-1]
			c.iss, c.why, c.again = v.iss, v.why, false
		}
	}
}
