package crashtest

import (
	"context"
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
	"github.com/clasp-dev/clasp/client"
)

// hookReceiver is a real HTTP receiver on loopback. While holding, every
// request waits (its answer never comes) until the test releases it or
// the sender goes away; otherwise answer picks the status.
type hookReceiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	holding bool
	release chan struct{}
	answer  func(n int) int
	got     []hookCall
	arrived chan hookCall
}

type hookCall struct {
	delivery, event, signature string
	body                       []byte
	status                     int
	activityID                 int64
}

func newHookReceiver(t *testing.T, hold bool, answer func(n int) int) *hookReceiver {
	rc := &hookReceiver{holding: hold, release: make(chan struct{}), answer: answer, arrived: make(chan hookCall, 10000)}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var ev clasp.WebhookEvent
		_ = json.Unmarshal(b, &ev)
		c := hookCall{delivery: r.Header.Get(clasp.HeaderDelivery), event: r.Header.Get(clasp.HeaderEvent),
			signature: r.Header.Get(clasp.HeaderSignature), body: b}
		if ev.Activity != nil {
			c.activityID = ev.Activity.ID
		}
		rc.mu.Lock()
		hold, n := rc.holding, len(rc.got)
		rc.mu.Unlock()
		if hold {
			rc.arrived <- c
			select {
			case <-rc.release:
			case <-r.Context().Done():
			}
			return
		}
		c.status = http.StatusOK
		if rc.answer != nil {
			c.status = rc.answer(n)
		}
		rc.mu.Lock()
		rc.got = append(rc.got, c)
		rc.mu.Unlock()
		w.WriteHeader(c.status)
		rc.arrived <- c
	}))
	t.Cleanup(func() {
		rc.stopHolding()
		rc.srv.Close()
	})
	return rc
}

// next returns the next request the receiver got. A receiver that gets
// nothing for hungAfter fails the test with the server's log instead of
// hanging it (a guard against a hung test, not a timing check).
func (rc *hookReceiver) next(t *testing.T, log *syncBuffer) hookCall {
	t.Helper()
	select {
	case c := <-rc.arrived:
		return c
	case <-time.After(hungAfter):
		t.Fatalf("the receiver got no request for %s\nserver log:\n%s", hungAfter, log.tail(60))
	}
	return hookCall{}
}

// hungAfter is how long a receiver waits for a request before the test
// is reported hung.
const hungAfter = 2 * time.Minute

func (rc *hookReceiver) stopHolding() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.holding {
		rc.holding = false
		close(rc.release)
	}
}

// TestWebhookKillBetweenCommitAndSend (W1, W3): the server is SIGKILLed
// while a delivery is in flight (the receiver holds it) and others are
// committed but not yet sent; after a restart on the same data every
// event arrives and is answered 200, and the log says delivered.
func TestWebhookKillBetweenCommitAndSend(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			rc := newHookReceiver(t, true, nil)
			log := &syncBuffer{}
			srv := startServer(t, append(serveArgs(t, backend, "clasp_hook_kill"), "--webhook-allow-private",
				"--webhook-timeout", "2s", "--webhook-retry-base", "10ms"), log)
			hc := newHTTPClient()
			board := client.New(srv.URL(), client.WithToken(srv.BoardToken()), client.WithHTTPClient(hc))
			co, err := board.CompanyCreate(ctx, client.CompanyCreateRequest{Name: "hooks", IssuePrefix: randomPrefix("WK")})
			if err != nil {
				t.Fatal(err)
			}
			w, err := board.WebhookCreate(ctx, co.ID, client.WebhookCreateRequest{URL: rc.srv.URL + "/hook", Events: []string{"issue.created"}})
			if err != nil {
				t.Fatal(err)
			}
			const n = 40
			want := map[string]bool{}
			for i := range n {
				iss, err := board.IssueCreate(ctx, co.ID, client.IssueCreateRequest{Title: fmt.Sprintf("issue %d", i)})
				if err != nil {
					t.Fatal(err)
				}
				want[iss.ID] = true
			}
			rc.next(t, log) // a delivery is in flight: its commit is done, its answer never came
			srv.Kill()
			rc.stopHolding()
			if err := srv.Restart(ctx); err != nil {
				t.Fatalf("restart: %v\n%s", err, log.tail(30))
			}
			board = client.New(srv.URL(), client.WithToken(srv.BoardToken()), client.WithHTTPClient(newHTTPClient()))
			got := map[string]bool{}
			acts, err := allActivity(ctx, board, co.ID, clasp.ActionIssueCreated)
			if err != nil {
				t.Fatal(err)
			}
			byActivity := map[int64]string{}
			for _, a := range acts {
				byActivity[a.ID] = a.EntityID
			}
			for len(got) < n {
				c := rc.next(t, log)
				if c.status == http.StatusOK {
					if err := clasp.VerifyWebhook(w.Secret, c.signature, c.body, time.Now(), 5*time.Minute); err != nil {
						t.Errorf("delivery %s: %v", c.delivery, err)
					}
					got[byActivity[c.activityID]] = true
				}
			}
			for id := range want {
				if !got[id] {
					t.Errorf("issue %s: its issue.created never arrived", id)
				}
			}
			counts, err := countDeliveries(ctx, board, w.ID)
			if err != nil {
				t.Fatal(err)
			}
			if counts[clasp.DeliveryDelivered]+counts[clasp.DeliveryPending] != n {
				t.Errorf("log: %v, want %d deliveries", counts, n)
			}
		})
	}
}

// countDeliveries counts a subscription's deliveries by status.
func countDeliveries(ctx context.Context, c *client.Client, webhookID string) (map[string]int, error) {
	page, err := c.WebhookDeliveries(ctx, webhookID, 1000)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, d := range page.Items {
		out[d.Status]++
	}
	return out, nil
}

// TestWebhookRetriesAndPrivateTargets (W2, W5), with the real binary: a
// receiver answering 500 three times then 200 gets the event four times
// with the same Clasp-Delivery; a server without --webhook-allow-private
// refuses a loopback target at creation.
func TestWebhookRetriesAndPrivateTargets(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			rc := newHookReceiver(t, false, func(n int) int {
				if n < 3 {
					return http.StatusInternalServerError
				}
				return http.StatusOK
			})
			log := &syncBuffer{}
			srv := startServer(t, append(serveArgs(t, backend, "clasp_hook_retry"), "--webhook-allow-private", "--webhook-retry-base", "10ms"), log)
			board := client.New(srv.URL(), client.WithToken(srv.BoardToken()), client.WithHTTPClient(newHTTPClient()))
			co, err := board.CompanyCreate(ctx, client.CompanyCreateRequest{Name: "hooks", IssuePrefix: randomPrefix("WR")})
			if err != nil {
				t.Fatal(err)
			}
			w, err := board.WebhookCreate(ctx, co.ID, client.WebhookCreateRequest{URL: rc.srv.URL, Events: []string{"issue.created"}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := board.IssueCreate(ctx, co.ID, client.IssueCreateRequest{Title: "retried"}); err != nil {
				t.Fatal(err)
			}
			var calls []hookCall
			for len(calls) < 4 {
				calls = append(calls, rc.next(t, log))
			}
			ids := []string{}
			for _, c := range calls {
				ids = append(ids, c.delivery)
			}
			if len(slices.Compact(ids)) != 1 || calls[3].status != http.StatusOK {
				t.Errorf("attempts: deliveries %v, last status %d; want one id, 200 last", ids, calls[3].status)
			}
			page, err := board.WebhookDeliveries(ctx, w.ID, 10)
			if err != nil {
				t.Fatal(err)
			}
			// The outcome of the fourth attempt is recorded after its answer:
			// wait for it through the log (each read is a fresh request).
			hung := time.Now().Add(hungAfter)
			for d := page.Items[0]; d.Status != clasp.DeliveryDelivered; d = page.Items[0] {
				if time.Now().After(hung) {
					t.Fatalf("the delivery answered 200 is still %s after %s\nserver log:\n%s", d.Status, hungAfter, log.tail(60))
				}
				if page, err = board.WebhookDeliveries(ctx, w.ID, 10); err != nil {
					t.Fatal(err)
				}
			}
			if d := page.Items[0]; d.Attempts != 4 || d.LastStatus == nil || *d.LastStatus != 200 {
				t.Errorf("log: %+v, want delivered after 4 attempts", d)
			}

			strict := startServer(t, serveArgs(t, backend, "clasp_hook_strict"), log)
			sb := client.New(strict.URL(), client.WithToken(strict.BoardToken()), client.WithHTTPClient(newHTTPClient()))
			co2, err := sb.CompanyCreate(ctx, client.CompanyCreateRequest{Name: "strict", IssuePrefix: randomPrefix("WS")})
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range []string{rc.srv.URL, "http://[::ffff:127.0.0.1]:9/", "http://localhost:9/", "http://169.254.169.254/"} {
				_, err = sb.WebhookCreate(ctx, co2.ID, client.WebhookCreateRequest{URL: u, Events: []string{"*"}})
				if clasp.ErrorCode(err) != clasp.CodeInvalidRequest || !strings.Contains(err.Error(), "--webhook-allow-private") {
					t.Errorf("create %s without --webhook-allow-private: %v, want 400 naming the flag", u, err)
				}
			}
		})
	}
}

// TestWebhookReplicas_Postgres (W3): two servers on one PostgreSQL
// database send each of 100 deliveries written through both exactly once
// (a receiver answering 200 at once sees no duplicate); then a replica
// killed while its delivery is in flight has that delivery sent by the
// other replica once its claim lapses, with the same Clasp-Delivery.
func TestWebhookReplicas_Postgres(t *testing.T) {
	ctx := t.Context()
	url := postgresURL(t, "clasp_hook_replicas")
	rc := newHookReceiver(t, false, nil)
	log := &syncBuffer{}
	args := func() []string {
		return []string{"--data-dir", t.TempDir(), "--database-url", url, "--webhook-allow-private", "--webhook-timeout", "2s", "--webhook-retry-base", "10ms"}
	}
	a := startServer(t, args(), log)
	b := startServer(t, args(), log)
	ca := client.New(a.URL(), client.WithToken(a.BoardToken()), client.WithHTTPClient(newHTTPClient()))
	cb := client.New(b.URL(), client.WithToken(a.BoardToken()), client.WithHTTPClient(newHTTPClient()))
	co, err := ca.CompanyCreate(ctx, client.CompanyCreateRequest{Name: "replicas", IssuePrefix: randomPrefix("WP")})
	if err != nil {
		t.Fatal(err)
	}
	w, err := ca.WebhookCreate(ctx, co.ID, client.WebhookCreateRequest{URL: rc.srv.URL, Events: []string{"issue.created"}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	for i := range n {
		c := ca
		if i%2 == 1 {
			c = cb
		}
		if _, err := c.IssueCreate(ctx, co.ID, client.IssueCreateRequest{Title: fmt.Sprintf("issue %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]int{}
	for len(seen) < n {
		seen[rc.next(t, log).delivery]++
	}
	counts, err := countDeliveries(ctx, ca, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	hung := time.Now().Add(hungAfter)
	for counts[clasp.DeliveryDelivered] < n { // the outcomes are recorded after the answers
		if time.Now().After(hung) {
			t.Fatalf("deliveries %v after %s, want %d delivered\nserver log:\n%s", counts, hungAfter, n, log.tail(60))
		}
		if counts, err = countDeliveries(ctx, ca, w.ID); err != nil {
			t.Fatal(err)
		}
	}
	rc.mu.Lock()
	total := len(rc.got)
	rc.mu.Unlock()
	for id, k := range seen {
		if k > 1 {
			t.Errorf("delivery %s sent %d times by the two replicas, want once", id, k)
		}
	}
	if total != n {
		t.Errorf("the receiver got %d requests for %d deliveries (every one recorded delivered): a delivery was sent twice", total, n)
	}

	// Only A runs; its delivery in flight is held until A is killed.
	b.Kill()
	rc.mu.Lock()
	rc.holding, rc.release = true, make(chan struct{})
	rc.mu.Unlock()
	iss, err := ca.IssueCreate(ctx, co.ID, client.IssueCreateRequest{Title: "in flight when its replica dies"})
	if err != nil {
		t.Fatal(err)
	}
	held := rc.next(t, log)
	a.Kill()
	rc.stopHolding()
	if err := b.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		c := rc.next(t, log)
		if c.status == http.StatusOK && c.delivery == held.delivery {
			var ev clasp.WebhookEvent
			if err := json.Unmarshal(c.body, &ev); err != nil || ev.Activity == nil || ev.Activity.EntityID != iss.ID {
				t.Errorf("redelivered body %s (%v), want the issue.created of %s", c.body, err, iss.ID)
			}
			break
		}
	}
}
