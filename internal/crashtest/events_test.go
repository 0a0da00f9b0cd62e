package crashtest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// eventLatencies starts two `clasp serve` replicas on one fresh PostgreSQL
// database, follows replica 2's event stream, performs n checkouts through
// replica 1 one after another, and returns, per checkout, the time from
// sending the checkout to seeing its issue.checked_out event on replica 2
// . It fails the test if any event is missing or arrives
// twice.
func eventLatencies(tb testing.TB, n int) []time.Duration {
	tb.Helper()
	args := serveArgs(tb, backendPostgres, "clasp_events")
	srvs := startReplicas(tb, 2, args)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	hc := newHTTPClient()
	defer hc.CloseIdleConnections()
	board1 := client.New(srvs[0].URL(), client.WithToken(boardToken(tb, srvs...)), client.WithHTTPClient(hc))
	board2 := client.New(srvs[1].URL(), client.WithToken(boardToken(tb, srvs...)), client.WithHTTPClient(hc))
	f := setUp(tb, ctx, board1, srvs[0].URL(), hc, 1, n)
	rc := client.New(srvs[0].URL(), client.WithToken(f.runs[0].RunToken), client.WithHTTPClient(hc))

	var (
		mu   sync.Mutex
		seen = map[string]time.Time{} // issue id -> when its checked_out event arrived on replica 2
	)
	ready := make(chan struct{})
	sctx, stop := context.WithCancel(ctx)
	streamDone := make(chan error, 1)
	go func() {
		opened := false
		streamDone <- board2.Events(sctx, f.company.ID, client.EventsOptions{AfterID: 0, Actions: []string{clasp.ActionIssueCheckedOut, clasp.ActionIssueCreated}},
			func(a *clasp.Activity) error {
				if !opened {
					opened = true
					close(ready)
				}
				if a.Action == clasp.ActionIssueCheckedOut {
					mu.Lock()
					if _, dup := seen[a.EntityID]; dup {
						seen["dup:"+a.EntityID] = time.Now()
					}
					seen[a.EntityID] = time.Now()
					mu.Unlock()
				}
				return nil
			})
	}()
	select {
	case <-ready: // the stream replayed the issues' creation: it is open
	case <-time.After(time.Minute):
		tb.Fatal("replica 2's event stream did not open within a minute")
	}
	sent := make([]time.Time, n)
	for i, iss := range f.issues {
		sent[i] = time.Now()
		if _, err := rc.IssueCheckout(ctx, iss.ID, client.CheckoutRequest{AgentID: f.agents[0].ID, ExpectedStatuses: []clasp.IssueStatus{clasp.IssueTodo}}); err != nil {
			tb.Fatalf("checkout %d on replica 1: %v", i, err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			_, ok := seen[iss.ID]
			mu.Unlock()
			if ok {
				break
			}
			if time.Now().After(deadline) {
				tb.Fatalf("checkout %d (%s) on replica 1 never reached replica 2's stream", i, iss.Identifier)
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	stop()
	<-streamDone
	lat := make([]time.Duration, n)
	for i, iss := range f.issues {
		if _, dup := seen["dup:"+iss.ID]; dup {
			tb.Errorf("issue %s: its checked_out event arrived twice", iss.Identifier)
		}
		lat[i] = seen[iss.ID].Sub(sent[i])
	}
	return lat
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// TestEventsAcrossReplicas: every checkout made on replica 1 reaches a
// client of replica 2's event stream exactly once (LISTEN/NOTIFY between
// replicas). Latency is logged, not asserted.
func TestEventsAcrossReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real servers; skipped with -short")
	}
	lat := eventLatencies(t, 50)
	t.Logf("checkout on replica 1 -> event on replica 2: p50 %v, p99 %v, max %v (n=%d)",
		percentile(lat, 0.5), percentile(lat, 0.99), percentile(lat, 1), len(lat))
}

// BenchmarkEventLatencyAcrossReplicas reports the p50 and p99 time from a
// checkout request sent to replica 1 to its event on replica 2's stream, in
// milliseconds:
//
//	go test -run '^$' -bench EventLatency -benchtime 500x ./internal/crashtest/
func BenchmarkEventLatencyAcrossReplicas(b *testing.B) {
	lat := eventLatencies(b, max(b.N, 20))
	b.ReportMetric(float64(percentile(lat, 0.5).Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "p99_ms")
	b.ReportMetric(0, "ns/op")
}
