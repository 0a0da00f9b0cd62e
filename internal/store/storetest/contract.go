package storetest

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// Fencing token (RULES.md, Fencing token): checkoutEpoch
// rises by one at every new acquisition (after a release, a finish, a
// force-release), stays on a same-run retry, never decreases, and the
// issue.checked_out rows carry 1..epoch once each.
func testFencingEpochSequence(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	var seen []int64
	step := func(what string, iss *clasp.Issue, err error, want int64) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		checkL7(t, what, iss)
		if iss.CheckoutEpoch != want {
			t.Errorf("%s: got epoch %d, want %d", what, iss.CheckoutEpoch, want)
		}
		seen = append(seen, iss.CheckoutEpoch)
	}
	r1 := openRun(t, e.st, e.a)
	iss, err := checkout(ctx, e.st, r1, i1.ID, clasp.IssueTodo)
	step("R1 checkout", iss, err, 1)
	iss, err = checkout(ctx, e.st, r1, i1.ID, clasp.IssueTodo)
	step("R1 retry", iss, err, 1)
	iss, err = release(ctx, e.st, runActor(r1), i1.ID, false)
	step("R1 release", iss, err, 1)
	iss, err = checkout(ctx, e.st, r1, i1.ID, clasp.IssueTodo)
	step("R1 checkout after release", iss, err, 2)
	_, err = finish(ctx, e.st, r1, clasp.RunSucceeded)
	step("R1 finish", getIssue(t, e.st, i1.ID), err, 2)
	r2 := openRun(t, e.st, e.a)
	iss, err = checkout(ctx, e.st, r2, i1.ID, clasp.IssueTodo)
	step("R2 checkout", iss, err, 3)
	iss, err = e.st.IssueForceRelease(ctx, &store.IssueForceReleaseParams{Ref: i1.ID, Reason: "test", Actor: boardActor()})
	step("force-release", iss, err, 3)
	iss, err = checkout(ctx, e.st, r2, i1.ID, clasp.IssueTodo)
	step("R2 checkout after force-release", iss, err, 4)
	if err := e.h.ExpireRunLease(ctx, r2.ID); err != nil {
		t.Fatalf("expire R2: %v", err)
	}
	r3 := openRun(t, e.st, e.a)
	iss, err = checkout(ctx, e.st, r3, i1.ID, clasp.IssueTodo)
	step("R3 adopts lost R2", iss, err, 5)
	iss, err = e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: i1.ID, Status: ptr(clasp.IssueDone), Actor: boardActor()})
	step("board PATCH done", iss, err, 5)
	iss, err = e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: i1.ID, Status: ptr(clasp.IssueTodo), Actor: boardActor()})
	step("board PATCH todo", iss, err, 5)
	iss, err = checkout(ctx, e.st, r3, i1.ID, clasp.IssueTodo)
	step("R3 checkout again", iss, err, 6)

	for i := 1; i < len(seen); i++ {
		if seen[i] < seen[i-1] {
			t.Errorf("epoch went down: %v", seen)
		}
	}
	var epochs []int
	for _, a := range e.issueActivity(t, i1.ID, clasp.ActionIssueCheckedOut) {
		var n int
		if _, err := fmt.Sscan(asString(details(t, a)["checkoutEpoch"]), &n); err != nil {
			t.Fatalf("checkoutEpoch of %v: %v", details(t, a), err)
		}
		epochs = append(epochs, n)
	}
	sort.Ints(epochs)
	if diff := cmp.Diff([]int{1, 2, 3, 4, 5, 6}, epochs); diff != "" {
		t.Errorf("checkoutEpoch of the issue.checked_out rows (-want +got):\n%s", diff)
	}
}

// Companies: the issue prefix is unique (409 already_exists); get and list
// (oldest first); archive and restore (RULES.md, Actors and credentials).
func testCompanyPrefixUnique(t *testing.T, open opener) {
	st, _ := open(t)
	ctx := t.Context()
	c1 := newCompany(t, st, "ACME")
	_, err := st.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "Another", IssuePrefix: "ACME", Actor: boardActor()})
	wantCode(t, "second ACME", err, clasp.CodeAlreadyExists)
	c2 := newCompany(t, st, "BETA")
	if c1.IssuePrefix != "ACME" || c1.Name != "Company ACME" || c1.ID == "" || c1.CreatedAt.IsZero() {
		t.Errorf("created company: got %+v, want name, prefix, id and createdAt", c1)
	}
	got, err := st.CompanyGet(ctx, c1.ID)
	if err != nil {
		t.Fatalf("get company: %v", err)
	}
	if diff := cmp.Diff(c1, got); diff != "" {
		t.Errorf("get company (-created +got):\n%s", diff)
	}
	_, err = st.CompanyGet(ctx, "00000000-0000-4000-8000-000000000000")
	wantCode(t, "unknown company", err, clasp.CodeNotFound)
	listIDs := func(includeArchived bool) []string {
		t.Helper()
		list, _, err := st.CompanyList(ctx, store.Page{Limit: 100}, includeArchived)
		if err != nil {
			t.Fatalf("list companies: %v", err)
		}
		var ids []string
		for _, c := range list {
			ids = append(ids, c.ID)
		}
		return ids
	}
	if diff := cmp.Diff([]string{c1.ID, c2.ID}, listIDs(false)); diff != "" {
		t.Errorf("company list, oldest first (-want +got):\n%s", diff)
	}

	// Archive: left out of the list unless asked for; asking twice
	// changes nothing and writes one activity row; restore brings it back.
	arch := func(id string, archive bool) *clasp.Company {
		t.Helper()
		co, err := st.CompanyArchive(ctx, &store.CompanyArchiveParams{ID: id, Archive: archive, Actor: boardActor()})
		if err != nil {
			t.Fatalf("archive company %s (%v): %v", id, archive, err)
		}
		return co
	}
	a1 := arch(c1.ID, true)
	if a1.ArchivedAt == nil || a1.Name != c1.Name {
		t.Fatalf("archived company: %+v, want archivedAt set", a1)
	}
	if a2 := arch(c1.ID, true); a2.ArchivedAt == nil || !a2.ArchivedAt.Equal(*a1.ArchivedAt) {
		t.Errorf("archived twice: archivedAt %v, want the first %v", a2.ArchivedAt, a1.ArchivedAt)
	}
	if diff := cmp.Diff([]string{c2.ID}, listIDs(false)); diff != "" {
		t.Errorf("company list without archived (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{c1.ID, c2.ID}, listIDs(true)); diff != "" {
		t.Errorf("company list with archived (-want +got):\n%s", diff)
	}
	if got, err := st.CompanyGet(ctx, c1.ID); err != nil || got.ArchivedAt == nil {
		t.Errorf("get of an archived company: %+v, %v", got, err)
	}
	if r := arch(c1.ID, false); r.ArchivedAt != nil {
		t.Errorf("restored company: archivedAt %v, want nil", r.ArchivedAt)
	}
	arch(c1.ID, false)
	if diff := cmp.Diff([]string{c1.ID, c2.ID}, listIDs(false)); diff != "" {
		t.Errorf("company list after restore (-want +got):\n%s", diff)
	}
	acts, _, err := st.ActivityList(ctx, &store.ActivityListParams{CompanyID: c1.ID, Page: store.Page{Limit: 100}})
	if err != nil {
		t.Fatalf("activity of company: %v", err)
	}
	counts := map[string]int{}
	for _, a := range acts {
		counts[a.Action]++
	}
	if counts[clasp.ActionCompanyArchived] != 1 || counts[clasp.ActionCompanyUnarchived] != 1 {
		t.Errorf("activity rows: %v, want one company.archived and one company.unarchived", counts)
	}
	_, err = st.CompanyArchive(ctx, &store.CompanyArchiveParams{ID: "00000000-0000-4000-8000-000000000000", Archive: true, Actor: boardActor()})
	wantCode(t, "archive of an unknown company", err, clasp.CodeNotFound)
}

// Agents: the name key (trimmed, lower-cased name) is unique per company
// (409 already_exists) but not across companies; unknown company 404.
func testAgentNameKeyUnique(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	for _, name := range []string{"alpha", " Alpha ", "ALPHA"} {
		_, err := e.st.AgentCreate(ctx, &store.AgentCreateParams{CompanyID: e.co.ID, Name: name, Actor: boardActor()})
		wantCode(t, fmt.Sprintf("agent %q in ACME", name), err, clasp.CodeAlreadyExists)
	}
	g := newAgent(t, e.st, e.co.ID, "  Gamma Ray ")
	if g.NameKey != "gamma ray" || g.Status != clasp.AgentActive || g.CompanyID != e.co.ID {
		t.Errorf("agent Gamma Ray: got name key %q status %s company %s, want \"gamma ray\", active, %s", g.NameKey, g.Status, g.CompanyID, e.co.ID)
	}
	c2 := newCompany(t, e.st, "OTHER")
	if a := newAgent(t, e.st, c2.ID, "Alpha"); a.NameKey != "alpha" {
		t.Errorf("alpha in OTHER: got name key %q, want alpha", a.NameKey)
	}
	_, err := e.st.AgentCreate(ctx, &store.AgentCreateParams{CompanyID: "00000000-0000-4000-8000-000000000000", Name: "ghost", Actor: boardActor()})
	wantCode(t, "agent of unknown company", err, clasp.CodeNotFound)
	_, err = e.st.AgentGet(ctx, "00000000-0000-4000-8000-000000000000")
	wantCode(t, "unknown agent", err, clasp.CodeNotFound)
	got, err := e.st.AgentGet(ctx, e.a.ID)
	if err != nil {
		t.Fatalf("get agent: %v", err)
	}
	if diff := cmp.Diff(e.a, got); diff != "" {
		t.Errorf("get agent (-created +got):\n%s", diff)
	}
	list, _, err := e.st.AgentList(ctx, e.co.ID, store.Page{Limit: 100})
	if err != nil {
		t.Fatalf("list agents: %v", err)
	}
	var ids []string
	for _, a := range list {
		ids = append(ids, a.ID)
	}
	if diff := cmp.Diff([]string{e.a.ID, e.b.ID, g.ID}, ids); diff != "" {
		t.Errorf("agent list of ACME, oldest first (-want +got):\n%s", diff)
	}
}

// API keys: a key authenticates its agent until revoked (401
// unauthenticated after); revoking again answers the key unchanged;
// terminating an agent revokes its keys.
func testAgentKeys(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	h := newTokenHash()
	k, err := e.st.AgentKeyCreate(ctx, &store.AgentKeyCreateParams{AgentID: e.a.ID, Prefix: "clasp_ak_abc", TokenHash: h, Actor: boardActor()})
	if err != nil {
		t.Fatalf("create key: %v", err)
	}
	if k.AgentID != e.a.ID || k.Prefix != "clasp_ak_abc" || k.RevokedAt != nil || k.ID == "" {
		t.Errorf("created key: got %+v, want agent A, prefix clasp_ak_abc, not revoked", k)
	}
	got, err := e.st.AgentAuthenticate(ctx, h)
	if err != nil || got.ID != e.a.ID {
		t.Fatalf("authenticate: got %v, %v, want agent A", got, err)
	}
	_, err = e.st.AgentAuthenticate(ctx, newTokenHash())
	wantCode(t, "unknown key", err, clasp.CodeUnauthenticated)
	_, err = e.st.AgentKeyCreate(ctx, &store.AgentKeyCreateParams{AgentID: "00000000-0000-4000-8000-000000000000", Prefix: "clasp_ak_xyz", TokenHash: newTokenHash(), Actor: boardActor()})
	wantCode(t, "key of unknown agent", err, clasp.CodeNotFound)

	_, err = e.st.AgentKeyRevoke(ctx, e.b.ID, k.ID, boardActor())
	wantCode(t, "revoke A's key through B", err, clasp.CodeNotFound)
	_, err = e.st.AgentKeyRevoke(ctx, e.a.ID, "00000000-0000-4000-8000-000000000000", boardActor())
	wantCode(t, "revoke unknown key", err, clasp.CodeNotFound)
	rk, err := e.st.AgentKeyRevoke(ctx, e.a.ID, k.ID, boardActor())
	if err != nil || rk.RevokedAt == nil {
		t.Fatalf("revoke: got %+v, %v, want revokedAt set", rk, err)
	}
	_, err = e.st.AgentAuthenticate(ctx, h)
	wantCode(t, "revoked key", err, clasp.CodeUnauthenticated)
	again, err := e.st.AgentKeyRevoke(ctx, e.a.ID, k.ID, boardActor())
	if err != nil || again.RevokedAt == nil || !again.RevokedAt.Equal(*rk.RevokedAt) {
		t.Errorf("revoke again: got %+v, %v, want the key unchanged (revokedAt %v)", again, err, rk.RevokedAt)
	}

	hb := newTokenHash()
	if _, err := e.st.AgentKeyCreate(ctx, &store.AgentKeyCreateParams{AgentID: e.b.ID, Prefix: "clasp_ak_bbb", TokenHash: hb, Actor: boardActor()}); err != nil {
		t.Fatalf("create B's key: %v", err)
	}
	if _, err := e.st.AgentAuthenticate(ctx, hb); err != nil {
		t.Fatalf("authenticate B: %v", err)
	}
	if _, err := e.st.AgentUpdate(ctx, &store.AgentUpdateParams{AgentID: e.b.ID, Status: ptr(clasp.AgentTerminated), Actor: boardActor()}); err != nil {
		t.Fatalf("terminate B: %v", err)
	}
	_, err = e.st.AgentAuthenticate(ctx, hb)
	wantCode(t, "terminated agent's key", err, clasp.CodeUnauthenticated)
	keys, err := e.st.AgentKeyList(ctx, e.b.ID)
	if err != nil || len(keys) != 1 || keys[0].RevokedAt == nil || keys[0].Token != "" {
		t.Errorf("B's keys after termination: got %+v, %v, want one revoked key without secret", keys, err)
	}
	_, err = e.st.AgentUpdate(ctx, &store.AgentUpdateParams{AgentID: "00000000-0000-4000-8000-000000000000", Status: ptr(clasp.AgentPaused), Actor: boardActor()})
	wantCode(t, "update unknown agent", err, clasp.CodeNotFound)
}

// Run tokens authenticate their run and agent while the run is live only:
// not after it finished, not once its lease expired, not for a terminated
// agent.
func testRunAuthenticate(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	open1 := func(a *clasp.Agent) (*clasp.Run, string) {
		t.Helper()
		p := runOpenParams(a, leaseTTL)
		r, err := e.st.RunOpen(ctx, p)
		if err != nil {
			t.Fatalf("open run: %v", err)
		}
		return r, p.TokenHash
	}
	r1, h1 := open1(e.a)
	if r1.Status != clasp.RunRunning || r1.AgentID != e.a.ID || r1.CompanyID != e.co.ID || r1.LeaseExpiresAt == nil || r1.InvocationSource != clasp.InvocationSelf {
		t.Errorf("opened run: got %+v, want running with a lease, agent A, source self", r1)
	}
	a, r, err := e.st.RunAuthenticate(ctx, h1)
	if err != nil || a.ID != e.a.ID || r.ID != r1.ID {
		t.Fatalf("authenticate R1: got %v, %v, %v, want A and R1", a, r, err)
	}
	_, _, err = e.st.RunAuthenticate(ctx, newTokenHash())
	wantCode(t, "unknown run token", err, clasp.CodeUnauthenticated)

	if _, err := finish(ctx, e.st, r1, clasp.RunSucceeded); err != nil {
		t.Fatalf("finish R1: %v", err)
	}
	_, _, err = e.st.RunAuthenticate(ctx, h1)
	wantCode(t, "finished run's token", err, clasp.CodeUnauthenticated)

	r2, h2 := open1(e.a)
	if err := e.h.ExpireRunLease(ctx, r2.ID); err != nil {
		t.Fatalf("expire R2: %v", err)
	}
	_, _, err = e.st.RunAuthenticate(ctx, h2)
	wantCode(t, "lost run's token", err, clasp.CodeUnauthenticated)

	_, h3 := open1(e.b)
	if _, err := e.st.AgentUpdate(ctx, &store.AgentUpdateParams{AgentID: e.b.ID, Status: ptr(clasp.AgentTerminated), Actor: boardActor()}); err != nil {
		t.Fatalf("terminate B: %v", err)
	}
	_, _, err = e.st.RunAuthenticate(ctx, h3)
	wantCode(t, "terminated agent's run token", err, clasp.CodeUnauthenticated)

	_, err = e.st.RunGet(ctx, "00000000-0000-4000-8000-000000000000")
	wantCode(t, "unknown run", err, clasp.CodeNotFound)
}

// Runs list newest first, filtered by status and agent.
func testRunList(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	r1, r2 := openRun(t, e.st, e.a), openRun(t, e.st, e.b)
	i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, e.a.ID)
	p := runOpenParams(e.a, leaseTTL)
	p.IssueID = strings.ToLower(i1.Identifier)
	r3, err := e.st.RunOpen(ctx, p)
	if err != nil {
		t.Fatalf("open run for %s: %v", p.IssueID, err)
	}
	if deref(r3.IssueID) != i1.ID {
		t.Errorf("run opened for %s: got issueId %q, want %q", p.IssueID, deref(r3.IssueID), i1.ID)
	}
	if _, err := finish(ctx, e.st, r3, clasp.RunCancelled); err != nil {
		t.Fatalf("finish R3: %v", err)
	}
	list := func(p store.RunListParams) []string {
		t.Helper()
		p.CompanyID = e.co.ID
		p.Page.Limit = 100
		runs, next, err := e.st.RunList(ctx, &p)
		if err != nil || next != "" {
			t.Fatalf("list runs %+v: got next %q, %v", p, next, err)
		}
		var ids []string
		for i, r := range runs {
			if i > 0 && r.CreatedAt.After(runs[i-1].CreatedAt) {
				t.Errorf("runs %+v not newest first: %v after %v", p, r.CreatedAt, runs[i-1].CreatedAt)
			}
			ids = append(ids, r.ID)
		}
		sort.Strings(ids)
		return ids
	}
	sorted := func(s ...string) []string { sort.Strings(s); return s }
	if diff := cmp.Diff(sorted(r1.ID, r2.ID, r3.ID), list(store.RunListParams{})); diff != "" {
		t.Errorf("all runs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(sorted(r1.ID, r3.ID), list(store.RunListParams{AgentID: e.a.ID})); diff != "" {
		t.Errorf("A's runs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(sorted(r1.ID, r2.ID), list(store.RunListParams{Statuses: []clasp.RunStatus{clasp.RunRunning}})); diff != "" {
		t.Errorf("running runs (-want +got):\n%s", diff)
	}
}

// Issue pagination: 250 issues paged 100 at a time through the cursor: 100,
// 100, 50, no next cursor at the end, no duplicate, no gap, newest first.
func testIssuePagination(t *testing.T, open opener) {
	e := newEnv(t, open)
	const n = 250
	want := map[string]bool{}
	for range n {
		want[newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "").ID] = true
	}
	p := store.IssueListParams{CompanyID: e.co.ID, Page: store.Page{Limit: 100}}
	seen := map[string]bool{}
	var sizes []int
	var all []*clasp.Issue
	for range 10 {
		page, next, err := e.st.IssueList(t.Context(), &p)
		if err != nil {
			t.Fatalf("list page %d: %v", len(sizes)+1, err)
		}
		sizes = append(sizes, len(page))
		for _, iss := range page {
			if seen[iss.ID] {
				t.Errorf("issue %s listed twice", iss.Identifier)
			}
			seen[iss.ID] = true
		}
		all = append(all, page...)
		if next == "" {
			break
		}
		p.Page.Cursor = next
	}
	if diff := cmp.Diff([]int{100, 100, 50}, sizes); diff != "" {
		t.Errorf("page sizes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("issues listed (-want +got):\n%s", diff)
	}
	for i := 1; i < len(all); i++ {
		if all[i].CreatedAt.After(all[i-1].CreatedAt) {
			t.Errorf("not newest first: %s (%v) after %s (%v)", all[i].Identifier, all[i].CreatedAt, all[i-1].Identifier, all[i-1].CreatedAt)
			break
		}
	}
}

// Issue list filters: statuses, assignee, unassigned, query (title or
// identifier, case-insensitive).
func testIssueListFilters(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	mk := func(title string, status clasp.IssueStatus, assignee string) *clasp.Issue {
		t.Helper()
		iss, err := e.st.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: e.co.ID, Title: title, Status: status, AssigneeAgentID: assignee, Actor: boardActor()})
		if err != nil {
			t.Fatalf("create %q: %v", title, err)
		}
		return iss
	}
	i1 := mk("Fix login bug", clasp.IssueTodo, e.a.ID)
	i2 := mk("Write docs", clasp.IssueBacklog, "")
	i3 := mk("Login page colours", clasp.IssueBlocked, e.b.ID)
	if i2.Status != clasp.IssueBacklog || i2.Priority != clasp.PriorityMedium {
		t.Errorf("defaults: got status %s priority %s, want backlog, medium", i2.Status, i2.Priority)
	}
	i4 := mk("default status", "", "")
	if i4.Status != clasp.IssueBacklog {
		t.Errorf("default status: got %s, want backlog", i4.Status)
	}
	cases := []struct {
		name string
		p    store.IssueListParams
		want []string
	}{
		{"statuses", store.IssueListParams{Statuses: []clasp.IssueStatus{clasp.IssueTodo, clasp.IssueBlocked}}, []string{i1.ID, i3.ID}},
		{"assignee", store.IssueListParams{AssigneeAgentID: e.a.ID}, []string{i1.ID}},
		{"unassigned", store.IssueListParams{Unassigned: true, Statuses: []clasp.IssueStatus{clasp.IssueBacklog}}, []string{i2.ID, i4.ID}},
		{"query title", store.IssueListParams{Query: "LOGIN"}, []string{i1.ID, i3.ID}},
		{"query identifier", store.IssueListParams{Query: strings.ToLower(i2.Identifier)}, []string{i2.ID}},
	}
	for _, tc := range cases {
		tc.p.CompanyID = e.co.ID
		tc.p.Page.Limit = 100
		got, _, err := e.st.IssueList(ctx, &tc.p)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		wantIssueIDs(t, tc.name, got, tc.want)
	}
}

// wantIssueIDs fails t unless got holds exactly the issues of ids want, in
// any order.
func wantIssueIDs(t *testing.T, what string, got []*clasp.Issue, want []string) {
	t.Helper()
	var ids []string
	for _, iss := range got {
		ids = append(ids, iss.ID)
	}
	sort.Strings(ids)
	want = slices.Sorted(slices.Values(want))
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("%s (-want +got):\n%s", what, diff)
	}
}

// The issue list's query folds case beyond ASCII on every store: a
// non-ASCII title is found by a differently cased non-ASCII query, ASCII
// still folds, and %, _ and \ in the query match only themselves.
func testIssueListQueryFold(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	mk := func(title string) string {
		t.Helper()
		iss, err := e.st.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: e.co.ID, Title: title, Actor: boardActor()})
		if err != nil {
			t.Fatalf("create %q: %v", title, err)
		}
		return iss.ID
	}
	uni := mk("Ünïcode Straße")
	ecole := mk("école d'été")
	greek := mk("Ελληνικά κείμενα")
	plain := mk("Unicode plain")
	login := mk("Fix Login bug")
	pct := mk(`50% done_now \ back`)
	kelvin := mk("\u212Aelvin scale") // KELVIN SIGN, whose lower case is an ASCII k
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"ünï", []string{uni}},
		{"ÜNÏCODE STRAßE", []string{uni}},
		{"ÉCOLE D'ÉTÉ", []string{ecole}},
		{"ΕΛΛΗΝΙΚΆ", []string{greek}},
		{"unicode", []string{plain}},
		{"LOGIN", []string{login}},
		{"%", []string{pct}},
		{"E_N", []string{pct}},
		{`\ BACK`, []string{pct}},
		{"ünïx", nil},
		{"kelvin", []string{kelvin}}, // an ASCII query, a value that is not ASCII
	} {
		got, _, err := e.st.IssueList(ctx, &store.IssueListParams{CompanyID: e.co.ID, Query: tc.query, Page: store.Page{Limit: 100}})
		if err != nil {
			t.Errorf("query %q: %v", tc.query, err)
			continue
		}
		wantIssueIDs(t, fmt.Sprintf("query %q", tc.query), got, tc.want)
	}
}

// IssueGet finds an issue by UUID or by identifier in any case; a companyID
// scope hides other companies' issues; unknown refs are 404. Checkout,
// release and PATCH (with a comment and without) take identifiers too.
func testIssueGetByIdentifier(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	if i1.Identifier != "ACME-1" || i1.CompanyID != e.co.ID || i1.CheckoutEpoch != 0 || i1.CheckoutRunID != nil {
		t.Errorf("first issue: got identifier %q company %s epoch %d lock %v, want ACME-1, ACME, 0, none", i1.Identifier, i1.CompanyID, i1.CheckoutEpoch, i1.CheckoutRunID)
	}
	for _, ref := range []string{i1.ID, "ACME-1", "acme-1", "Acme-1"} {
		for _, scope := range []string{"", e.co.ID} {
			got, err := e.st.IssueGet(ctx, scope, ref)
			if err != nil {
				t.Errorf("get %q (scope %q): %v", ref, scope, err)
				continue
			}
			if diff := cmp.Diff(i1, got); diff != "" {
				t.Errorf("get %q (scope %q) (-created +got):\n%s", ref, scope, diff)
			}
		}
	}
	c2 := newCompany(t, e.st, "OTHER")
	for _, ref := range []string{"ACME-2", "acme-0", "ACME-", "00000000-0000-4000-8000-000000000000", "garbage"} {
		_, err := e.st.IssueGet(ctx, "", ref)
		wantCode(t, fmt.Sprintf("get %q", ref), err, clasp.CodeNotFound)
	}
	_, err := e.st.IssueGet(ctx, c2.ID, "acme-1")
	wantCode(t, "get acme-1 scoped to OTHER", err, clasp.CodeNotFound)

	r1 := openRun(t, e.st, e.a)
	got := mustCheckout(t, e.st, r1, "acme-1", clasp.IssueTodo)
	wantLock(t, "checkout by lower-case identifier", got, held(e.a.ID, r1.ID, 1))
	for _, ref := range []string{"ACME-2", "garbage"} {
		_, err := checkout(ctx, e.st, r1, ref, clasp.IssueTodo)
		wantCode(t, fmt.Sprintf("checkout %q", ref), err, clasp.CodeNotFound)
		_, err = release(ctx, e.st, runActor(r1), ref, false)
		wantCode(t, fmt.Sprintf("release %q", ref), err, clasp.CodeNotFound)
	}
	got, err = release(ctx, e.st, runActor(r1), "Acme-1", false)
	if err != nil {
		t.Fatalf("release by identifier: %v", err)
	}
	if got.ID != i1.ID || got.CheckoutRunID != nil || got.ExecutionRunID != nil || got.Status != clasp.IssueTodo {
		t.Errorf("release by identifier: got issue %s locks %v %v status %s, want %s unlocked, todo",
			got.ID, got.CheckoutRunID, got.ExecutionRunID, got.Status, i1.ID)
	}

	// A PATCH takes identifiers too, with a comment and without.
	for _, ref := range []string{"ACME-2", "garbage"} {
		_, err := e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: ref, Title: ptr("x"), Actor: runActor(r1)})
		wantCode(t, fmt.Sprintf("update %q", ref), err, clasp.CodeNotFound)
		_, err = e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: ref, Title: ptr("x"), Comment: ptr("c"), Actor: runActor(r1)})
		wantCode(t, fmt.Sprintf("update %q with a comment", ref), err, clasp.CodeNotFound)
	}
	got, err = e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: "acme-1", Title: ptr("renamed"), Actor: runActor(r1)})
	if err != nil || got.ID != i1.ID || got.Title != "renamed" {
		t.Fatalf("update by identifier: got %+v, %v; want %s renamed", got, err, i1.ID)
	}
	got, err = e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: "Acme-1", Status: ptr(clasp.IssueDone), Comment: ptr("shipped"), Actor: runActor(r1)})
	if err != nil || got.ID != i1.ID || got.Status != clasp.IssueDone {
		t.Fatalf("update by identifier with a comment: got %+v, %v; want %s done", got, err, i1.ID)
	}
	cs, err := e.st.CommentList(ctx, &store.CommentListParams{Ref: i1.ID})
	if err != nil || len(cs) != 1 || cs[0].Body != "shipped" {
		t.Errorf("comments after the update by identifier: got %v, %v; want the one comment shipped", cs, err)
	}
}

// Inbox: the issues assigned to the agent with status todo, in_progress or
// blocked, most urgent first; activeRun names the live run holding the
// execution lock, and disappears once that run is lost.
func testInbox(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	low := newIssueP(t, e.st, e.co.ID, clasp.IssueTodo, clasp.PriorityLow, e.a.ID)
	crit := newIssueP(t, e.st, e.co.ID, clasp.IssueBlocked, clasp.PriorityCritical, e.a.ID)
	high := newIssueP(t, e.st, e.co.ID, clasp.IssueTodo, clasp.PriorityHigh, e.a.ID)
	med := newIssueP(t, e.st, e.co.ID, clasp.IssueTodo, clasp.PriorityMedium, e.a.ID)
	newIssueP(t, e.st, e.co.ID, clasp.IssueBacklog, clasp.PriorityCritical, e.a.ID)
	newIssueP(t, e.st, e.co.ID, clasp.IssueInReview, clasp.PriorityCritical, e.a.ID)
	newIssueP(t, e.st, e.co.ID, clasp.IssueDone, clasp.PriorityCritical, e.a.ID)
	newIssueP(t, e.st, e.co.ID, clasp.IssueTodo, clasp.PriorityCritical, e.b.ID)
	newIssueP(t, e.st, e.co.ID, clasp.IssueTodo, clasp.PriorityCritical, "")
	r1 := openRun(t, e.st, e.a)
	mustCheckout(t, e.st, r1, high.ID, clasp.IssueTodo)

	type item struct {
		ID, Identifier string
		Status         clasp.IssueStatus
		Priority       clasp.Priority
		ActiveRun      string
	}
	inbox := func() []item {
		t.Helper()
		got, err := e.st.IssueInbox(ctx, e.a.ID)
		if err != nil {
			t.Fatalf("inbox: %v", err)
		}
		var out []item
		for _, it := range got {
			var ar string
			if it.ActiveRun != nil {
				ar = it.ActiveRun.ID + "/" + string(it.ActiveRun.Status)
			}
			out = append(out, item{it.ID, it.Identifier, it.Status, it.Priority, ar})
		}
		return out
	}
	want := []item{
		{crit.ID, crit.Identifier, clasp.IssueBlocked, clasp.PriorityCritical, ""},
		{high.ID, high.Identifier, clasp.IssueInProgress, clasp.PriorityHigh, r1.ID + "/running"},
		{med.ID, med.Identifier, clasp.IssueTodo, clasp.PriorityMedium, ""},
		{low.ID, low.Identifier, clasp.IssueTodo, clasp.PriorityLow, ""},
	}
	if diff := cmp.Diff(want, inbox()); diff != "" {
		t.Errorf("inbox of A (-want +got):\n%s", diff)
	}
	if err := e.h.ExpireRunLease(ctx, r1.ID); err != nil {
		t.Fatalf("expire R1: %v", err)
	}
	want[1].ActiveRun = ""
	if diff := cmp.Diff(want, inbox()); diff != "" {
		t.Errorf("inbox of A once R1 is lost (-want +got):\n%s", diff)
	}
	if got, err := e.st.IssueInbox(ctx, e.b.ID); err != nil || len(got) != 1 {
		t.Errorf("inbox of B: got %d items, %v, want 1", len(got), err)
	}
}

// Comments: oldest first or newest first, after a comment id, continued
// after a cursor in either order, limited; one by id; authored by an agent
// in a run or by the board; any agent of the company may comment, even on
// an issue another run holds.
func testComments(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	ra, rb := openRun(t, e.st, e.a), openRun(t, e.st, e.b)
	mustCheckout(t, e.st, ra, i1.ID, clasp.IssueTodo)
	add := func(body string, actor store.Actor) *clasp.Comment {
		t.Helper()
		c, err := e.st.CommentCreate(ctx, &store.CommentCreateParams{Ref: i1.Identifier, Body: body, Actor: actor})
		if err != nil {
			t.Fatalf("comment %q: %v", body, err)
		}
		return c
	}
	c1 := add("first", runActor(ra))
	c2 := add("second", boardActor())
	c3 := add("third, by a non-holder", runActor(rb))
	if deref(c1.AuthorAgentID) != e.a.ID || deref(c1.RunID) != ra.ID || c1.AuthorBoard || c1.IssueID != i1.ID {
		t.Errorf("agent comment: got %+v, want author A in R1 on I1", c1)
	}
	if !c2.AuthorBoard || c2.AuthorAgentID != nil || c2.RunID != nil {
		t.Errorf("board comment: got %+v, want authorBoard and no agent or run", c2)
	}
	list := func(p store.CommentListParams) []string {
		t.Helper()
		p.Ref = i1.ID
		cs, err := e.st.CommentList(ctx, &p)
		if err != nil {
			t.Fatalf("list comments %+v: %v", p, err)
		}
		var bodies []string
		for _, c := range cs {
			bodies = append(bodies, c.Body)
		}
		return bodies
	}
	if diff := cmp.Diff([]string{"first", "second", "third, by a non-holder"}, list(store.CommentListParams{Limit: 100})); diff != "" {
		t.Errorf("comments (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"second", "third, by a non-holder"}, list(store.CommentListParams{After: c1.ID, Limit: 100})); diff != "" {
		t.Errorf("comments after the first (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"first"}, list(store.CommentListParams{Limit: 1})); diff != "" {
		t.Errorf("comments limit 1 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"third, by a non-holder"}, list(store.CommentListParams{After: c2.ID, Limit: 100, CompanyID: e.co.ID})); diff != "" {
		t.Errorf("comments after the second, scoped (-want +got):\n%s", diff)
	}
	// Newest first (Desc), and the cursor continuing either order; After
	// keeps only newer comments in both orders.
	all, last := []string{"third, by a non-holder", "second", "first"}, "third, by a non-holder"
	for _, tc := range []struct {
		name string
		p    store.CommentListParams
		want []string
	}{
		{"desc", store.CommentListParams{Desc: true, Limit: 100}, all},
		{"desc limit 2", store.CommentListParams{Desc: true, Limit: 2}, all[:2]},
		{"desc cursor", store.CommentListParams{Desc: true, Cursor: c2.ID, Limit: 100}, []string{"first"}},
		{"desc after", store.CommentListParams{Desc: true, After: c1.ID, Limit: 100}, all[:2]},
		{"desc after and cursor", store.CommentListParams{Desc: true, After: c1.ID, Cursor: c3.ID, Limit: 100}, []string{"second"}},
		{"asc cursor", store.CommentListParams{Cursor: c2.ID, Limit: 100}, []string{last}},
		{"desc cursor at the oldest", store.CommentListParams{Desc: true, Cursor: c1.ID, Limit: 100}, nil},
	} {
		if diff := cmp.Diff(tc.want, list(tc.p)); diff != "" {
			t.Errorf("comments %s (-want +got):\n%s", tc.name, diff)
		}
	}
	_, err := e.st.CommentList(ctx, &store.CommentListParams{Ref: i1.ID, Cursor: "00000000-0000-4000-8000-000000000000", Limit: 1})
	wantCode(t, "comments with a cursor of no comment", err, clasp.CodeInvalidRequest)
	// One comment by id, of its issue only.
	if got, err := e.st.CommentGet(ctx, e.co.ID, i1.Identifier, c2.ID); err != nil || got.ID != c2.ID || got.Body != "second" {
		t.Errorf("comment get: got %+v, %v, want the second comment", got, err)
	}
	i2 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	_, err = e.st.CommentGet(ctx, "", i2.ID, c2.ID)
	wantCode(t, "comment get on another issue", err, clasp.CodeNotFound)
	_, err = e.st.CommentGet(ctx, "", "ACME-99", c2.ID)
	wantCode(t, "comment get on an unknown issue", err, clasp.CodeNotFound)
	if deref(c3.AuthorAgentID) != e.b.ID || deref(c3.RunID) != rb.ID {
		t.Errorf("B's comment: got %+v, want author B in its run", c3)
	}
	wantLock(t, "after comments", getIssue(t, e.st, i1.ID), held(e.a.ID, ra.ID, 1))
	_, err = e.st.CommentCreate(ctx, &store.CommentCreateParams{Ref: "ACME-99", Body: "x", Actor: boardActor()})
	wantCode(t, "comment on unknown issue", err, clasp.CodeNotFound)
}

// Settings: get of a missing key is 404; put-if-absent keeps the first value.
func testSettings(t *testing.T, open opener) {
	st, _ := open(t)
	ctx := t.Context()
	_, err := st.SettingGet(ctx, "board_token_hash")
	wantCode(t, "missing setting", err, clasp.CodeNotFound)
	for _, v := range []string{"v1", "v2"} {
		if got, err := st.SettingPutIfAbsent(ctx, "board_token_hash", v); err != nil || got != "v1" {
			t.Errorf("put-if-absent %q: got %q, %v, want v1", v, got, err)
		}
	}
	if got, err := st.SettingGet(ctx, "board_token_hash"); err != nil || got != "v1" {
		t.Errorf("get: got %q, %v, want v1", got, err)
	}
	if err := st.Ping(ctx); err != nil {
		t.Errorf("ping: %v", err)
	}
}

// Activity lists newest first (ids strictly decreasing) through the cursor,
// with no duplicate and no gap, and filters by action and entity.
func testActivityList(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	var ids []string
	for range 30 {
		ids = append(ids, newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "").ID)
	}
	all := allActivity(t, e.st, store.ActivityListParams{CompanyID: e.co.ID})
	p := store.ActivityListParams{CompanyID: e.co.ID, Page: store.Page{Limit: 7}}
	var paged []*clasp.Activity
	for range 100 {
		rows, next, err := e.st.ActivityList(ctx, &p)
		if err != nil {
			t.Fatalf("list activity: %v", err)
		}
		if len(rows) > 7 {
			t.Fatalf("page of %d rows, want at most 7", len(rows))
		}
		paged = append(paged, rows...)
		if next == "" {
			break
		}
		p.Page.Cursor = next
	}
	if diff := cmp.Diff(all, paged); diff != "" {
		t.Errorf("pages of 7 differ from one list (-one +pages):\n%s", diff)
	}
	for i := 1; i < len(paged); i++ {
		if paged[i].ID >= paged[i-1].ID {
			t.Errorf("activity not newest first: id %d after %d", paged[i].ID, paged[i-1].ID)
		}
	}
	created := allActivity(t, e.st, store.ActivityListParams{CompanyID: e.co.ID, Action: clasp.ActionIssueCreated})
	if len(created) != len(ids) {
		t.Errorf("issue.created rows: got %d, want %d", len(created), len(ids))
	}
	one := allActivity(t, e.st, store.ActivityListParams{CompanyID: e.co.ID, EntityID: ids[3]})
	if len(one) == 0 {
		t.Errorf("activity of issue %s: got none, want its issue.created", ids[3])
	}
	for _, a := range one {
		if a.EntityID != ids[3] || a.CompanyID != e.co.ID {
			t.Errorf("entity filter: got row for %s in %s, want %s in %s", a.EntityID, a.CompanyID, ids[3], e.co.ID)
		}
	}
	c2 := newCompany(t, e.st, "OTHER")
	if rows := allActivity(t, e.st, store.ActivityListParams{CompanyID: c2.ID, Action: clasp.ActionIssueCreated}); len(rows) != 0 {
		t.Errorf("issue.created rows of another company: got %d, want 0", len(rows))
	}
}
