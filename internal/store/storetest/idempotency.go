package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// idem returns the idempotency parameters of a request of actor with key
// and request hash.
func idem(actor store.Actor, key, hash string) *store.IdempotencyParams {
	return &store.IdempotencyParams{ActorID: actor.ID(), Key: key, RequestHash: hash}
}

// Idempotency-Key (RULES.md, Errors and requests), recorded in the creating transaction
// (issue: the key was reserved, created and completed in three
// transactions, so a crash in between stranded it): a repeat of (actor,
// key, request hash) creates nothing and returns the resource the first
// call created, as it is now, with Replayed set; the same key with another
// request hash, or for another kind of resource, answers 422
// idempotency_key_reused; keys are per actor; a call that fails records
// nothing, so a retry with the same key creates.
func testIdempotencyReplayCreatesNothing(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	create := func(actor store.Actor, key, hash, title string) (*clasp.Issue, *store.IdempotencyParams, error) {
		p := idem(actor, key, hash)
		iss, err := e.st.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: e.co.ID, Title: title, Actor: actor, Idempotency: p})
		return iss, p, err
	}
	first, p, err := create(boardActor(), "k1", "h1", "once")
	if err != nil || p.Replayed {
		t.Fatalf("first create: got %v, replayed %v, want a new issue", err, p.Replayed)
	}
	again, p, err := create(boardActor(), "k1", "h1", "once")
	if err != nil || !p.Replayed {
		t.Fatalf("repeat: got %v, replayed %v, want the first issue replayed", err, p.Replayed)
	}
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("replayed issue differs from the first answer (-first +replay):\n%s", diff)
	}
	_, _, err = create(boardActor(), "k1", "h2", "other")
	wantCode(t, "same key, another request", err, clasp.CodeIdempotencyKeyReused)
	if e := clasp.AsError(err); e != nil && e.Details["field"] != "Idempotency-Key" {
		t.Errorf("key reused: details %v, want field Idempotency-Key", e.Details)
	}
	byA, p, err := create(agentActor(e.a), "k1", "h1", "once")
	if err != nil || p.Replayed || byA.ID == first.ID {
		t.Errorf("same key by another actor: got %+v, %v, replayed %v, want a second issue", byA, err, p.Replayed)
	}

	// The replay answers the issue as it is now (the record names it; no
	// response body is stored).
	if _, err := e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: first.ID, Title: ptr("renamed"), Actor: boardActor()}); err != nil {
		t.Fatalf("rename: %v", err)
	}
	now, p, err := create(boardActor(), "k1", "h1", "once")
	if err != nil || !p.Replayed || now.ID != first.ID || now.Title != "renamed" {
		t.Errorf("repeat after a rename: got %+v, %v, replayed %v, want the first issue, titled renamed", now, err, p.Replayed)
	}

	// A failed call records nothing: the retry (here with a fixed body) creates.
	_, _, err = create(boardActor(), "k2", "h3", "   ")
	wantCode(t, "failed first call", err, clasp.CodeInvalidRequest)
	retry, p, err := create(boardActor(), "k2", "h4", "fixed")
	if err != nil || p.Replayed || retry.Title != "fixed" {
		t.Errorf("retry after a failed call: got %+v, %v, replayed %v, want a new issue", retry, err, p.Replayed)
	}
	issues, _, err := e.st.IssueList(ctx, &store.IssueListParams{CompanyID: e.co.ID, Page: store.Page{Limit: 100}})
	if err != nil || len(issues) != 3 {
		t.Errorf("issues of the company: got %d, %v, want 3", len(issues), err)
	}
	created := allActivity(t, e.st, store.ActivityListParams{CompanyID: e.co.ID, Action: clasp.ActionIssueCreated})
	if len(created) != 3 {
		t.Errorf("issue.created rows: got %d, want 3 (replays write none)", len(created))
	}

	// Comments.
	comment := func(actor store.Actor, key, hash string) (*clasp.Comment, *store.IdempotencyParams, error) {
		p := idem(actor, key, hash)
		c, err := e.st.CommentCreate(ctx, &store.CommentCreateParams{Ref: first.ID, Body: "result", Actor: actor, Idempotency: p})
		return c, p, err
	}
	c1, p, err := comment(agentActor(e.a), "c1", "hc")
	if err != nil || p.Replayed {
		t.Fatalf("first comment: got %v, replayed %v", err, p.Replayed)
	}
	c2, p, err := comment(agentActor(e.a), "c1", "hc")
	if err != nil || !p.Replayed {
		t.Fatalf("repeated comment: got %v, replayed %v, want a replay", err, p.Replayed)
	}
	if diff := cmp.Diff(c1, c2); diff != "" {
		t.Errorf("replayed comment differs (-first +replay):\n%s", diff)
	}
	_, _, err = comment(agentActor(e.a), "c1", "hc-other")
	wantCode(t, "comment key reused", err, clasp.CodeIdempotencyKeyReused)
	// The board's k1 names an issue: a comment with it is another request.
	_, _, err = comment(boardActor(), "k1", "h1")
	wantCode(t, "issue key used for a comment", err, clasp.CodeIdempotencyKeyReused)
	cs, err := e.st.CommentList(ctx, &store.CommentListParams{Ref: first.ID})
	if err != nil || len(cs) != 1 {
		t.Errorf("comments: got %d, %v, want 1", len(cs), err)
	}
}

// Concurrent first calls with one Idempotency-Key create one resource: the
// others replay it (SQLite's single writer serialises them; on PostgreSQL
// the unique (actor, key) record makes the later transactions fail and
// retry into the replay).
func testIdempotencyConcurrentDuplicates(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	const n = 8
	var (
		issues [n]*clasp.Issue
		params [n]*store.IdempotencyParams
		errs   [n]error
	)
	race(n, func(i int) {
		params[i] = idem(agentActor(e.a), "race", "h")
		issues[i], errs[i] = e.st.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: e.co.ID, Title: "once",
			Actor: agentActor(e.a), Idempotency: params[i]})
	})
	fresh := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("concurrent create %d: %v", i, errs[i])
		}
		if !params[i].Replayed {
			fresh++
		}
		if issues[i].ID != issues[0].ID {
			t.Errorf("concurrent create %d: got issue %s, want %s (the one created)", i, issues[i].Identifier, issues[0].Identifier)
		}
	}
	if fresh != 1 {
		t.Errorf("concurrent creates with one key: %d created, want 1 (the others replayed)", fresh)
	}
	list, _, err := e.st.IssueList(ctx, &store.IssueListParams{CompanyID: e.co.ID, Page: store.Page{Limit: 100}})
	if err != nil || len(list) != 1 || list[0].Identifier != "ACME-1" {
		t.Errorf("issues after the race: got %d, %v, want just ACME-1", len(list), err)
	}
}

// Concurrent first comments with one Idempotency-Key add one comment and
// one issue.commented row: the others replay that comment.
func testIdempotencyConcurrentComments(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	iss := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	const n = 8
	var (
		comments [n]*clasp.Comment
		params   [n]*store.IdempotencyParams
		errs     [n]error
	)
	race(n, func(i int) {
		params[i] = idem(agentActor(e.a), "race", "h")
		comments[i], errs[i] = e.st.CommentCreate(ctx, &store.CommentCreateParams{Ref: iss.ID, Body: "once",
			Actor: agentActor(e.a), Idempotency: params[i]})
	})
	fresh := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("concurrent comment %d: %v", i, errs[i])
		}
		if !params[i].Replayed {
			fresh++
		}
		if comments[i].ID != comments[0].ID {
			t.Errorf("concurrent comment %d: got comment %s, want %s (the one created)", i, comments[i].ID, comments[0].ID)
		}
	}
	if fresh != 1 {
		t.Errorf("concurrent comments with one key: %d created, want 1 (the others replayed)", fresh)
	}
	cs, err := e.st.CommentList(ctx, &store.CommentListParams{Ref: iss.ID})
	if err != nil || len(cs) != 1 {
		t.Errorf("comments after the race: got %d, %v, want 1", len(cs), err)
	}
	if got := len(e.issueActivity(t, iss.ID, clasp.ActionIssueCommented)); got != 1 {
		t.Errorf("issue.commented rows after the race: got %d, want 1", got)
	}
}

// A replayed run open opens nothing and never takes away a token it gave
// out: the run keeps its token hash, the replay's hash (TokenHashFor of the
// recorded run's id, the caller deriving the same token again) must be the
// same, and the first token still authenticates. Ten concurrent opens with
// one key open one run whose every answer's token works. A replay with
// another hash (another API key of the agent) is 422
// idempotency_key_reused and changes nothing. Once the run is terminal or
// lost, a replay answers 409 run_not_live and changes nothing.
func testIdempotencyRunReplayKeepsToken(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	derive := func(secret string) func(string) string {
		return func(runID string) string {
			h := sha256.Sum256([]byte(secret + "\x00" + runID))
			return hex.EncodeToString(h[:])
		}
	}
	openRun := func(key, secret string) (*clasp.Run, *store.RunOpenParams, error) {
		p := runOpenParams(e.a, leaseTTL)
		p.TokenHashFor = derive(secret)
		p.Idempotency = idem(agentActor(e.a), key, "h")
		r, err := e.st.RunOpen(ctx, p)
		return r, p, err
	}
	authAs := func(what, hash, runID string) {
		t.Helper()
		if a, r, err := e.st.RunAuthenticate(ctx, hash); err != nil || a.ID != e.a.ID || r.ID != runID {
			t.Errorf("%s: authenticate got %v, %v, %v; want agent A in run %s", what, a, r, err, runID)
		}
	}
	r1, p1, err := openRun("run-1", "key-a")
	if err != nil || p1.Idempotency.Replayed {
		t.Fatalf("open: got %v, replayed %v", err, p1.Idempotency.Replayed)
	}
	authAs("first token", p1.TokenHashOf(r1.ID), r1.ID)
	r2, p2, err := openRun("run-1", "key-a")
	if err != nil || !p2.Idempotency.Replayed || r2.ID != r1.ID || r2.Status != clasp.RunRunning {
		t.Fatalf("replay: got %+v, %v, replayed %v, want run %s running, replayed", r2, err, p2.Idempotency.Replayed, r1.ID)
	}
	authAs("first token after the replay", p1.TokenHashOf(r1.ID), r1.ID)

	// Another credential's replay is refused and leaves the token alone,
	// whether it derives its hash or brings a random one.
	_, _, err = openRun("run-1", "key-b")
	wantCode(t, "replay under another key", err, clasp.CodeIdempotencyKeyReused)
	p := runOpenParams(e.a, leaseTTL)
	p.Idempotency = idem(agentActor(e.a), "run-1", "h")
	_, err = e.st.RunOpen(ctx, p)
	wantCode(t, "replay with a random token hash", err, clasp.CodeIdempotencyKeyReused)
	_, _, err = e.st.RunAuthenticate(ctx, p.TokenHash)
	wantCode(t, "refused replay's token", err, clasp.CodeUnauthenticated)
	authAs("first token after refused replays", p1.TokenHashOf(r1.ID), r1.ID)

	// Ten concurrent first opens with one key: one run, every token works.
	const n = 10
	var got [n]*clasp.Run
	var hashes [n]string
	race(n, func(i int) {
		r, p, err := openRun("run-c", "key-a")
		if err != nil {
			t.Errorf("concurrent open %d: %v", i, err)
			return
		}
		got[i], hashes[i] = r, p.TokenHashOf(r.ID)
	})
	for i := range n {
		if got[i] == nil {
			continue
		}
		if got[i].ID != got[0].ID {
			t.Errorf("concurrent open %d: run %s, want %s (one run)", i, got[i].ID, got[0].ID)
		}
		authAs(fmt.Sprintf("token of concurrent open %d", i), hashes[i], got[0].ID)
	}

	if _, err := finish(ctx, e.st, r1, clasp.RunSucceeded); err != nil {
		t.Fatalf("finish: %v", err)
	}
	_, _, err = openRun("run-1", "key-a")
	wantCode(t, "replay of a finished run", err, clasp.CodeRunNotLive)
	_, _, err = e.st.RunAuthenticate(ctx, p1.TokenHashOf(r1.ID))
	wantCode(t, "token of a finished run", err, clasp.CodeUnauthenticated)

	lost, _, err := openRun("run-2", "key-a")
	if err != nil {
		t.Fatalf("open run-2: %v", err)
	}
	if err := e.h.ExpireRunLease(ctx, lost.ID); err != nil {
		t.Fatalf("expire run-2: %v", err)
	}
	before := getRun(t, e.st, lost.ID)
	_, _, err = openRun("run-2", "key-a")
	wantCode(t, "replay of a lost run", err, clasp.CodeRunNotLive)
	if diff := cmp.Diff(before, getRun(t, e.st, lost.ID)); diff != "" {
		t.Errorf("lost run changed by a refused replay (-before +after):\n%s", diff)
	}

	runs, _, err := e.st.RunList(ctx, &store.RunListParams{CompanyID: e.co.ID, AgentID: e.a.ID, Page: store.Page{Limit: 100}})
	if err != nil || len(runs) != 3 {
		t.Errorf("runs of A: got %d, %v, want 3 (replays open none)", len(runs), err)
	}
	started := allActivity(t, e.st, store.ActivityListParams{CompanyID: e.co.ID, Action: clasp.ActionRunStarted})
	if len(started) != 3 {
		t.Errorf("run.started rows: got %d, want 3", len(started))
	}
}

// A PATCH with an Idempotency-Key (issue: an agent's PATCH {status: done,
// comment} committed after its replica was killed, the agent re-sent it to
// another replica, and the result comment was written twice) is applied
// once: a repeat of (actor, key, request hash) writes nothing (no update,
// comment or activity) and answers the issue as it is now, with Replayed
// set; the same key with another request hash, or for a creation, answers
// 422 idempotency_key_reused; a refused PATCH records nothing; concurrent
// duplicates apply once (PostgreSQL: the unique (actor, key) record makes
// the later statements fail and retry into the replay).
func testIdempotencyPatchReplayWritesOnce(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	r := openRun(t, e.st, e.a)
	iss := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, e.a.ID)
	mustCheckout(t, e.st, r, iss.ID, clasp.IssueTodo)
	patch := func(actor store.Actor, ref, key, hash, body string) (*clasp.Issue, *store.IdempotencyParams, error) {
		p := idem(actor, key, hash)
		got, err := e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: ref, Status: ptr(clasp.IssueDone), Comment: ptr(body),
			Actor: actor, Idempotency: p})
		return got, p, err
	}
	counts := func(issueID string) (comments, updated, commented int) {
		t.Helper()
		cs, err := e.st.CommentList(ctx, &store.CommentListParams{Ref: issueID})
		if err != nil {
			t.Fatalf("comments of %s: %v", issueID, err)
		}
		return len(cs), len(e.issueActivity(t, issueID, clasp.ActionIssueUpdated)), len(e.issueActivity(t, issueID, clasp.ActionIssueCommented))
	}

	// A refused PATCH records nothing: another agent's run gets 409, and
	// its key stays free.
	rb := openRun(t, e.st, e.b)
	_, _, err := patch(runActor(rb), iss.ID, "done-b", "hb", "not mine")
	wantCode(t, "PATCH of a locked issue by another run", err, clasp.CodeOwnershipConflict)

	first, p, err := patch(runActor(r), iss.ID, "done-1", "hd", "result")
	if err != nil || p.Replayed || first.Status != clasp.IssueDone {
		t.Fatalf("first PATCH: got %+v, %v, replayed %v, want done, applied", first, err, p.Replayed)
	}
	again, p, err := patch(runActor(r), iss.ID, "done-1", "hd", "result")
	if err != nil || !p.Replayed {
		t.Fatalf("repeated PATCH: got %v, replayed %v, want a replay", err, p.Replayed)
	}
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("replayed PATCH answer differs from the first (-first +replay):\n%s", diff)
	}
	if c, u, cd := counts(iss.ID); c != 1 || u != 1 || cd != 1 {
		t.Errorf("after a replayed PATCH: %d comments, %d issue.updated, %d issue.commented, want 1 each", c, u, cd)
	}
	// The replay answers the issue as it is now.
	if _, err := e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: iss.ID, Title: ptr("renamed"), Actor: boardActor()}); err != nil {
		t.Fatalf("rename: %v", err)
	}
	now, p, err := patch(runActor(r), iss.ID, "done-1", "hd", "result")
	if err != nil || !p.Replayed || now.Title != "renamed" {
		t.Errorf("replay after a rename: got %+v, %v, replayed %v, want the issue titled renamed", now, err, p.Replayed)
	}
	_, _, err = patch(runActor(r), iss.ID, "done-1", "hd-other", "another result")
	wantCode(t, "same key, another PATCH", err, clasp.CodeIdempotencyKeyReused)
	_, err = e.st.CommentCreate(ctx, &store.CommentCreateParams{Ref: iss.ID, Body: "result", Actor: runActor(r),
		Idempotency: idem(runActor(r), "done-1", "hd")})
	wantCode(t, "PATCH key used for a comment", err, clasp.CodeIdempotencyKeyReused)
	if c, u, cd := counts(iss.ID); c != 1 || u != 2 || cd != 1 { // the board's rename is the second issue.updated
		t.Errorf("after refused reuses: %d comments, %d issue.updated, %d issue.commented, want 1, 2, 1", c, u, cd)
	}
	// Run b's key was not recorded by its refused PATCH: now the issue is
	// done and unlocked, the same request applies.
	if _, p, err := patch(runActor(rb), iss.ID, "done-b", "hb", "not mine"); err != nil || p.Replayed {
		t.Errorf("retry of a refused PATCH: got %v, replayed %v, want applied", err, p.Replayed)
	}

	// Concurrent duplicates of one PATCH (the holder's done with its
	// result) apply once; the others replay.
	r2 := openRun(t, e.st, e.a)
	iss2 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, e.a.ID)
	mustCheckout(t, e.st, r2, iss2.ID, clasp.IssueTodo)
	const n = 8
	var (
		got    [n]*clasp.Issue
		params [n]*store.IdempotencyParams
		errs   [n]error
	)
	race(n, func(i int) { got[i], params[i], errs[i] = patch(runActor(r2), iss2.ID, "done-2", "hd2", "result") })
	applied := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("concurrent PATCH %d: %v", i, errs[i])
		}
		if !params[i].Replayed {
			applied++
		}
		if got[i].ID != iss2.ID || got[i].Status != clasp.IssueDone {
			t.Errorf("concurrent PATCH %d: got %s %s, want %s done", i, got[i].ID, got[i].Status, iss2.ID)
		}
	}
	if applied != 1 {
		t.Errorf("concurrent PATCHes with one key: %d applied, want 1 (the others replayed)", applied)
	}
	if c, u, cd := counts(iss2.ID); c != 1 || u != 1 || cd != 1 {
		t.Errorf("after concurrent duplicates: %d comments, %d issue.updated, %d issue.commented, want 1 each", c, u, cd)
	}
}
