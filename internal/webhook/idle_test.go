package webhook_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
	"github.com/clasp-dev/clasp/internal/store/sqlite"
	"github.com/clasp-dev/clasp/internal/webhook"
)

// countingStore is a real store whose dispatcher-facing reads are counted.
type countingStore struct {
	store.Store
	nextDue, anyEnabled atomic.Int64
}

func (c *countingStore) WebhookNextDue(ctx context.Context) (time.Duration, bool, error) {
	c.nextDue.Add(1)
	return c.Store.WebhookNextDue(ctx)
}

func (c *countingStore) WebhookAnyEnabled(ctx context.Context) (bool, error) {
	c.anyEnabled.Add(1)
	return c.Store.WebhookAnyEnabled(ctx)
}

// waitFor waits, up to 10 s, until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWritesWithoutSubscriptionsAskNothing: with no subscription enabled
// and no delivery pending, writes wake the dispatcher but it does not ask
// the store for due deliveries after each (W1: no write can create one);
// once a subscription is created and the dispatcher nudged, a write is
// delivered at once, well before the poll interval.
func TestWritesWithoutSubscriptionsAskNothing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	realDrv, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "clasp.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	real := store.New(realDrv)
	defer real.Close()
	st := &countingStore{Store: real}
	co, err := st.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "idle", IssuePrefix: "IDL"})
	if err != nil {
		t.Fatal(err)
	}
	d := webhook.New(st, webhook.Config{AllowPrivate: true, Poll: time.Hour})
	d.Start(ctx)
	defer d.Stop()
	waitFor(t, "the first round", func() bool { return st.nextDue.Load() >= 1 })

	board := store.Actor{Type: clasp.ActorBoard}
	for i := range 50 {
		if _, err := st.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: co.ID, Title: fmt.Sprint("i", i), Actor: board}); err != nil {
			t.Fatal(err)
		}
	}
	// A write's wake was seen: the dispatcher asked whether a subscription is enabled.
	waitFor(t, "a write's wake", func() bool { return st.anyEnabled.Load() >= 1 })
	if n := st.nextDue.Load(); n != 1 {
		t.Errorf("due deliveries asked %d times after 50 writes with no subscription, want 1 (the first round)", n)
	}

	got := make(chan string, 10)
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Get(clasp.HeaderDelivery) }))
	defer rc.Close()
	if _, err := st.WebhookCreate(ctx, &store.WebhookCreateParams{CompanyID: co.ID, URL: rc.URL, Events: []string{"issue.created"},
		Secret: "0123456789abcdef"}); err != nil {
		t.Fatal(err)
	}
	d.Nudge() // as the API does after a subscription's change
	if _, err := st.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: co.ID, Title: "after", Actor: board}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("a write after a subscription was created was not delivered")
	}
}
