package storetest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
	"github.com/clasp-dev/clasp/internal/webhook"
)

// webhookTests are the contract tests of RULES.md, Webhooks (W1-W5): the
// outbox written by the database in the transaction of each change, and
// the dispatcher against a real HTTP receiver on loopback.
var webhookTests = []struct {
	name string
	fn   func(*testing.T, opener)
}{
	{"W1_OutboxByTrigger", testW1OutboxByTrigger},
	{"W1_RolledBackChangeDeliversNothing", testW1RolledBack},
	{"W6_SubscriptionInput", testW6SubscriptionInput},
	{"W2_SignedDelivery", testW2SignedDelivery},
	{"W2_RetriedSameDeliveryID", testW2Retried},
	{"W2_GiveUpFailingRedeliver", testW2GiveUp},
	{"W3_OrderPerEntity16Writers", testW3Order},
	{"W3_LapsedClaimSentAgain", testW3LapsedClaim},
	{"W5_PrivateTargetRefused", testW5PrivateRefused},
}

const testSecret = "0123456789abcdef0123456789abcdef"

func newWebhook(t *testing.T, st store.Store, companyID, url string, events ...string) *clasp.Webhook {
	t.Helper()
	w, err := st.WebhookCreate(t.Context(), &store.WebhookCreateParams{CompanyID: companyID, URL: url, Events: events, Secret: testSecret})
	if err != nil {
		t.Fatalf("setup: create webhook %v: %v", events, err)
	}
	return w
}

func deliveries(t *testing.T, st store.Store, webhookID string) []*clasp.WebhookDelivery {
	t.Helper()
	var out []*clasp.WebhookDelivery
	page := store.Page{Limit: 1000}
	for {
		ds, next, err := st.WebhookDeliveryList(t.Context(), webhookID, page)
		if err != nil {
			t.Fatalf("list deliveries: %v", err)
		}
		out = append(out, ds...)
		if next == "" {
			return out
		}
		page.Cursor = next
	}
}

func deliveryEvents(ds []*clasp.WebhookDelivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Event)
	}
	slices.Sort(out)
	return out
}

// W1: an activity row writes one delivery per enabled subscription of
// its company whose patterns match its action, and no other.
func testW1OutboxByTrigger(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	other := newCompany(t, e.st, "OTHER")
	all := newWebhook(t, e.st, e.co.ID, "https://example.com/all", "*")
	issues := newWebhook(t, e.st, e.co.ID, "https://example.com/issues", "issue.*")
	created := newWebhook(t, e.st, e.co.ID, "https://example.com/created", "issue.created", "run.started")
	off := newWebhook(t, e.st, e.co.ID, "https://example.com/off", "*")
	if _, err := e.st.WebhookUpdate(ctx, &store.WebhookUpdateParams{ID: off.ID, Enabled: ptr(false)}); err != nil {
		t.Fatal(err)
	}
	foreign := newWebhook(t, e.st, other.ID, "https://example.com/foreign", "*")
	iss := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	if _, err := e.st.CommentCreate(ctx, &store.CommentCreateParams{Ref: iss.ID, Body: "hello", Actor: boardActor()}); err != nil {
		t.Fatal(err)
	}
	r := openRun(t, e.st, e.a)
	mustCheckout(t, e.st, r, iss.ID, clasp.IssueTodo)

	if got, want := deliveryEvents(deliveries(t, e.st, created.ID)), []string{"issue.created", "run.started"}; !slices.Equal(got, want) {
		t.Errorf("issue.created+run.started subscription: got %v, want %v", got, want)
	}
	wantIssue := []string{"issue.checked_out", "issue.commented", "issue.created"}
	if got := deliveryEvents(deliveries(t, e.st, issues.ID)); !slices.Equal(got, wantIssue) {
		t.Errorf("issue.* subscription: got %v, want %v", got, wantIssue)
	}
	acts := allActivity(t, e.st, store.ActivityListParams{CompanyID: e.co.ID})
	var wantAll []string
	var afterAll int
	for _, a := range acts {
		if a.ID > 0 && a.CreatedAt.Compare(all.CreatedAt) >= 0 {
			wantAll = append(wantAll, a.Action)
			afterAll++
		}
	}
	slices.Sort(wantAll)
	gotAll := deliveries(t, e.st, all.ID)
	if !slices.Equal(deliveryEvents(gotAll), wantAll) {
		t.Errorf("* subscription: got %v, want every activity row since it was made %v", deliveryEvents(gotAll), wantAll)
	}
	for _, d := range gotAll {
		if d.Status != clasp.DeliveryPending || d.Attempts != 0 || d.CompanyID != e.co.ID || d.ID == "" {
			t.Errorf("new delivery %+v: want pending, 0 attempts, of company %s, with an id", d, e.co.ID)
		}
	}
	if n := len(deliveries(t, e.st, off.ID)); n != 0 {
		t.Errorf("disabled subscription: %d deliveries, want 0", n)
	}
	if n := len(deliveries(t, e.st, foreign.ID)); n != 0 {
		t.Errorf("another company's subscription: %d deliveries, want 0", n)
	}
	// Deleting a subscription deletes its log.
	if err := e.st.WebhookDelete(ctx, issues.ID); err != nil {
		t.Fatal(err)
	}
	if n := len(deliveries(t, e.st, issues.ID)); n != 0 {
		t.Errorf("deleted subscription: %d deliveries left, want 0", n)
	}
	wantCode(t, "get deleted", func() error { _, err := e.st.WebhookGet(ctx, issues.ID); return err }(), clasp.CodeNotFound)
	wantCode(t, "delete again", e.st.WebhookDelete(ctx, issues.ID), clasp.CodeNotFound)
}

// W1: a change that rolls back (a creation refused by D2 after its insert
// ran in the transaction) leaves no delivery.
func testW1RolledBack(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	w := newWebhook(t, e.st, e.co.ID, "https://example.com/all", "*")
	blocker := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	_, err := e.st.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: e.co.ID, Title: "refused", Status: clasp.IssueDone,
		BlockedByIssueIDs: []string{blocker.ID}, Actor: boardActor()})
	wantCode(t, "create done with a blocker not done", err, clasp.CodeBlockedByUnresolved)
	ds := deliveries(t, e.st, w.ID)
	if len(ds) != 1 || ds[0].Event != clasp.ActionIssueCreated || ds[0].EntityID != blocker.ID {
		t.Errorf("deliveries after a rolled-back creation: %v, want only the blocker's issue.created", deliveryEvents(ds))
	}
}

// W6: bad subscription input is 400 naming the field; a missing company 404.
func testW6SubscriptionInput(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	cases := []struct {
		p     store.WebhookCreateParams
		field string
	}{
		{store.WebhookCreateParams{URL: "ftp://example.com", Events: []string{"*"}, Secret: testSecret}, "url"},
		{store.WebhookCreateParams{URL: "/relative", Events: []string{"*"}, Secret: testSecret}, "url"},
		{store.WebhookCreateParams{URL: "https://u:p@example.com", Events: []string{"*"}, Secret: testSecret}, "url"}, // #nosec G101 -- a URL with a password that must be refused, not a credential
		{store.WebhookCreateParams{URL: "https://example.com", Secret: testSecret}, "events"},
		{store.WebhookCreateParams{URL: "https://example.com", Events: []string{"Issue.*"}, Secret: testSecret}, "events"},
		{store.WebhookCreateParams{URL: "https://example.com", Events: []string{"issue.**"}, Secret: testSecret}, "events"},
		{store.WebhookCreateParams{URL: "https://example.com", Events: []string{"issue.escalatd"}, Secret: testSecret}, "events"}, // no such action
		{store.WebhookCreateParams{URL: "https://example.com", Events: []string{"isue.*"}, Secret: testSecret}, "events"},         // no action has the prefix
		{store.WebhookCreateParams{URL: "https://example.com", Events: []string{"*"}, Secret: "short"}, "secret"},
		{store.WebhookCreateParams{URL: "https://example.com", Events: []string{"*"}, Secret: testSecret, Format: "xml"}, "format"},
	}
	for _, c := range cases {
		c.p.CompanyID = e.co.ID
		_, err := e.st.WebhookCreate(ctx, &c.p)
		wantCode(t, fmt.Sprintf("create %+v", c.p), err, clasp.CodeInvalidRequest)
		if ce := clasp.AsError(err); ce != nil && ce.Details["field"] != c.field {
			t.Errorf("create %+v: field %v, want %s", c.p, ce.Details["field"], c.field)
		}
	}
	_, err := e.st.WebhookCreate(ctx, &store.WebhookCreateParams{CompanyID: "0190a0a0-0000-7000-8000-000000000000",
		URL: "https://example.com", Events: []string{"*"}, Secret: testSecret})
	wantCode(t, "missing company", err, clasp.CodeNotFound)
	if ws, _ := e.st.WebhookList(ctx, e.co.ID); len(ws) != 0 {
		t.Errorf("%d subscriptions after refused creates, want 0", len(ws))
	}
	w := newWebhook(t, e.st, e.co.ID, "https://example.com/a", "issue.*")
	_, err = e.st.WebhookUpdate(ctx, &store.WebhookUpdateParams{ID: w.ID, Events: []string{}})
	wantCode(t, "update events to none", err, clasp.CodeInvalidRequest)
	u, err := e.st.WebhookUpdate(ctx, &store.WebhookUpdateParams{ID: w.ID, URL: ptr("https://example.com/b"), Format: ptr("slack")})
	if err != nil {
		t.Fatal(err)
	}
	if u.URL != "https://example.com/b" || u.Format != "slack" || !slices.Equal(u.Events, []string{"issue.*"}) || u.Secret != "" {
		t.Errorf("updated: %+v", u)
	}
	_, err = e.st.WebhookUpdate(ctx, &store.WebhookUpdateParams{ID: "0190a0a0-0000-7000-8000-000000000000", Enabled: ptr(true)})
	wantCode(t, "update missing", err, clasp.CodeNotFound)
}

// receiver is a real HTTP server on loopback recording what it receives.
type receiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []received
	// answer, when set, picks the status of the n-th request (from 0).
	answer  func(n int, r received) int
	arrived chan received
}

type received struct {
	event, delivery, signature string
	body                       []byte
	payload                    clasp.WebhookEvent
}

func newReceiver(t *testing.T, answer func(n int, r received) int) *receiver {
	rc := &receiver{answer: answer, arrived: make(chan received, 100000)}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		x := received{event: r.Header.Get(clasp.HeaderEvent), delivery: r.Header.Get(clasp.HeaderDelivery),
			signature: r.Header.Get(clasp.HeaderSignature), body: b}
		_ = json.Unmarshal(b, &x.payload)
		rc.mu.Lock()
		n := len(rc.got)
		rc.got = append(rc.got, x)
		rc.mu.Unlock()
		code := http.StatusOK
		if rc.answer != nil {
			code = rc.answer(n, x)
		}
		w.WriteHeader(code)
		fmt.Fprintf(w, "answer %d", code)
		rc.arrived <- x
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// startDispatcher runs a dispatcher of st (loopback allowed unless
// private is false) with millisecond retries; outcomes are sent on the
// returned channel.
func startDispatcher(t *testing.T, st store.Store, allowPrivate bool, maxAge time.Duration) chan *store.WebhookOutcome {
	outs := make(chan *store.WebhookOutcome, 100000)
	d := webhook.New(st, webhook.Config{AllowPrivate: allowPrivate, RetryBase: time.Millisecond, RetryMax: 5 * time.Millisecond,
		MaxAge: maxAge, Timeout: 5 * time.Second, Poll: 100 * time.Millisecond,
		Observe: func(o *store.WebhookOutcome) { outs <- o }})
	d.Start(t.Context())
	t.Cleanup(d.Stop)
	return outs
}

// W2: a delivery is a JSON POST whose signature verifies with the
// subscription's secret, carrying the event, its delivery id and the
// activity row.
func testW2SignedDelivery(t *testing.T, open opener) {
	e := newEnv(t, open)
	rc := newReceiver(t, nil)
	w := newWebhook(t, e.st, e.co.ID, rc.srv.URL+"/hook", "issue.created")
	startDispatcher(t, e.st, true, 0)
	iss := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	x := <-rc.arrived
	if err := clasp.VerifyWebhook(testSecret, x.signature, x.body, time.Now(), 5*time.Minute); err != nil {
		t.Errorf("signature %q does not verify: %v", x.signature, err)
	}
	if err := clasp.VerifyWebhook("another secret of sixteen", x.signature, x.body, time.Now(), 0); err == nil {
		t.Errorf("signature verifies with another secret")
	}
	if x.event != clasp.ActionIssueCreated || x.payload.Event != x.event || x.payload.ID != x.delivery ||
		x.payload.Activity == nil || x.payload.Activity.EntityID != iss.ID || x.payload.CompanyID != e.co.ID {
		t.Errorf("delivery: event %q id %q payload %s", x.event, x.delivery, x.body)
	}
	ds := deliveries(t, e.st, w.ID)
	if len(ds) != 1 || ds[0].ID != x.delivery {
		t.Fatalf("log: %+v, want the one delivery %s", ds, x.delivery)
	}
}

// W2: a receiver answering 500 three times then 200 gets the event four
// times with the same Clasp-Delivery; the log says delivered after 4
// attempts with the last answer.
func testW2Retried(t *testing.T, open opener) {
	e := newEnv(t, open)
	rc := newReceiver(t, func(n int, _ received) int {
		if n < 3 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	w := newWebhook(t, e.st, e.co.ID, rc.srv.URL, "issue.created")
	outs := startDispatcher(t, e.st, true, 0)
	newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	var ids []string
	for range 4 {
		x := <-rc.arrived
		ids = append(ids, x.delivery)
	}
	for o := range outs {
		if o.OK {
			break
		}
	}
	if ids[0] == "" || slices.Compact(slices.Clone(ids))[0] != ids[0] || len(slices.Compact(slices.Clone(ids))) != 1 {
		t.Errorf("Clasp-Delivery of the 4 attempts: %v, want one id", ids)
	}
	ds := deliveries(t, e.st, w.ID)
	if len(ds) != 1 {
		t.Fatalf("log: %d deliveries, want 1", len(ds))
	}
	d := ds[0]
	if d.Status != clasp.DeliveryDelivered || d.Attempts != 4 || d.LastStatus == nil || *d.LastStatus != 200 ||
		d.LastBody == nil || *d.LastBody != "answer 200" || d.LatencyMs == nil || d.DeliveredAt == nil || d.NextAttemptAt != nil {
		t.Errorf("log entry: %+v", d)
	}
	rc.mu.Lock()
	n := len(rc.got)
	rc.mu.Unlock()
	if n != 4 {
		t.Errorf("receiver got %d requests, want 4", n)
	}
}

// W2, W4: a delivery failing past its retry window is failed and its
// subscription failing; a redelivery (same id) that succeeds clears it.
func testW2GiveUp(t *testing.T, open opener) {
	e := newEnv(t, open)
	var mu sync.Mutex
	code := http.StatusBadGateway
	rc := newReceiver(t, func(int, received) int { mu.Lock(); defer mu.Unlock(); return code })
	w := newWebhook(t, e.st, e.co.ID, rc.srv.URL, "issue.created")
	outs := startDispatcher(t, e.st, true, time.Nanosecond)
	newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	first := <-outs
	if first.OK {
		t.Fatal("attempt answered 502 recorded as delivered")
	}
	ds := deliveries(t, e.st, w.ID)
	if len(ds) != 1 || ds[0].Status != clasp.DeliveryFailed || ds[0].Attempts != 1 || deref(ds[0].LastStatus) != 502 {
		t.Fatalf("log after give-up: %+v", ds[0])
	}
	got, err := e.st.WebhookGet(t.Context(), w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Failing || got.FailingSince == nil {
		t.Errorf("subscription after a delivery given up: failing %v since %v, want failing", got.Failing, got.FailingSince)
	}
	mu.Lock()
	code = http.StatusNoContent
	mu.Unlock()
	re, err := e.st.WebhookRedeliver(t.Context(), ds[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if re.ID != ds[0].ID || re.Status != clasp.DeliveryPending {
		t.Errorf("redeliver answered %+v", re)
	}
	for o := range outs {
		if o.OK {
			break
		}
	}
	ds = deliveries(t, e.st, w.ID)
	if ds[0].Status != clasp.DeliveryDelivered || ds[0].Attempts != 2 || deref(ds[0].LastStatus) != 204 {
		t.Errorf("log after redelivery: %+v", ds[0])
	}
	got, _ = e.st.WebhookGet(t.Context(), w.ID)
	if got.Failing {
		t.Errorf("subscription still failing after a delivery succeeded")
	}
	_, err = e.st.WebhookRedeliver(t.Context(), "0190a0a0-0000-7000-8000-000000000000")
	wantCode(t, "redeliver missing", err, clasp.CodeNotFound)
}

// W3: 16 writers change 4 issues at once while the receiver fails one
// attempt in five: every event arrives, and each issue's events arrive in
// the order of their activity rows (a retry sends the same row again).
func testW3Order(t *testing.T, open opener) {
	e := newEnv(t, open)
	rc := newReceiver(t, func(n int, _ received) int {
		if n%5 == 2 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	w := newWebhook(t, e.st, e.co.ID, rc.srv.URL, "issue.updated")
	outs := startDispatcher(t, e.st, true, 0)
	var issues []*clasp.Issue
	for range 4 {
		issues = append(issues, newIssue(t, e.st, e.co.ID, clasp.IssueTodo, ""))
	}
	per := scale(8, 3)
	race(16, func(i int) {
		for k := range per {
			iss := issues[(i+k)%len(issues)]
			if _, err := e.st.IssueUpdate(t.Context(), &store.IssueUpdateParams{Ref: iss.ID,
				Title: ptr(fmt.Sprintf("writer %d change %d", i, k)), Actor: boardActor()}); err != nil {
				t.Error(err)
			}
		}
	})
	total := 16 * per
	for ok := 0; ok < total; {
		if o := <-outs; o.OK {
			ok++
		}
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	last := map[string]int64{}
	seen := map[int64]bool{}
	for _, x := range rc.got {
		a := x.payload.Activity
		if a == nil {
			t.Fatalf("delivery without activity: %s", x.body)
		}
		if a.ID < last[a.EntityID] {
			t.Errorf("issue %s: activity %d arrived after %d", a.EntityID, a.ID, last[a.EntityID])
		}
		last[a.EntityID] = a.ID
		seen[a.ID] = true
	}
	if len(seen) != total {
		t.Errorf("receiver got %d distinct events, want %d", len(seen), total)
	}
	for _, d := range deliveries(t, e.st, w.ID) {
		if d.Status != clasp.DeliveryDelivered {
			t.Errorf("delivery %s: %s", d.ID, d.Status)
		}
	}
}

// W3: a delivery claimed by a dispatcher that never records an outcome
// (it died mid-delivery) is claimed again once its claim lapses (here a
// claim of no duration), with the same id, and counted as a further
// attempt; the dead dispatcher's late outcome changes nothing.
func testW3LapsedClaim(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	w := newWebhook(t, e.st, e.co.ID, "https://example.com", "issue.created")
	newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	live, err := e.st.WebhookClaim(ctx, "live", 10, time.Hour)
	if err != nil || len(live) != 1 {
		t.Fatalf("claim: %v, %d jobs, want 1", err, len(live))
	}
	if again, err := e.st.WebhookClaim(ctx, "other", 10, time.Hour); err != nil || len(again) != 0 {
		t.Fatalf("claim while claimed: %v, %d jobs, want 0", err, len(again))
	}
	if err := e.st.WebhookRecord(ctx, &store.WebhookOutcome{Job: live[0], Status: 500, Delay: 0, MaxAge: time.Hour}); err != nil {
		t.Fatal(err)
	}
	dead, err := e.st.WebhookClaim(ctx, "dead", 10, 0)
	if err != nil || len(dead) != 1 || dead[0].Attempt != 2 {
		t.Fatalf("claim after a failed attempt: %v, %d jobs, want 1 (attempt 2)", err, len(dead))
	}
	again, err := e.st.WebhookClaim(ctx, "other", 10, time.Hour)
	if err != nil || len(again) != 1 {
		t.Fatalf("claim after the lapse: %v, %d jobs, want 1", err, len(again))
	}
	if again[0].ID != live[0].ID || again[0].Attempt != 3 {
		t.Errorf("reclaimed %s attempt %d, want %s attempt 3", again[0].ID, again[0].Attempt, live[0].ID)
	}
	if err := e.st.WebhookRecord(ctx, &store.WebhookOutcome{Job: dead[0], OK: true, Status: 200}); err != nil {
		t.Fatal(err)
	}
	if ds := deliveries(t, e.st, w.ID); ds[0].Status != clasp.DeliveryPending {
		t.Errorf("a lapsed claim's outcome was recorded: %+v", ds[0])
	}
	if err := e.st.WebhookRecord(ctx, &store.WebhookOutcome{Job: again[0], OK: true, Status: 200}); err != nil {
		t.Fatal(err)
	}
	if ds := deliveries(t, e.st, w.ID); ds[0].Status != clasp.DeliveryDelivered || ds[0].Attempts != 3 {
		t.Errorf("after the live claim's outcome: %+v", ds[0])
	}
}

// W5: without AllowPrivate a loopback target is refused at dial time:
// the receiver gets nothing and the log says why, without the URL's path
// (a Slack webhook's path is its secret).
func testW5PrivateRefused(t *testing.T, open opener) {
	e := newEnv(t, open)
	rc := newReceiver(t, nil)
	w := newWebhook(t, e.st, e.co.ID, rc.srv.URL+"/services/T0/B0/secret-path", "issue.created")
	outs := startDispatcher(t, e.st, false, 0)
	newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	o := <-outs
	if o.OK || !strings.Contains(o.Error, "refused") {
		t.Errorf("outcome: ok %v error %q, want refused", o.OK, o.Error)
	}
	rc.mu.Lock()
	n := len(rc.got)
	rc.mu.Unlock()
	if n != 0 {
		t.Errorf("a private target received %d requests", n)
	}
	ds := deliveries(t, e.st, w.ID)
	if ds[0].LastError == nil || !strings.Contains(*ds[0].LastError, "webhook-allow-private") {
		t.Errorf("log entry's error: %v", ds[0].LastError)
	} else if strings.Contains(*ds[0].LastError, "secret-path") {
		t.Errorf("log entry's error shows the URL's path, which may be a secret: %s", *ds[0].LastError)
	}
}
