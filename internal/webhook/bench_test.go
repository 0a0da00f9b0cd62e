package webhook_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/serveproc"
	"github.com/clasp-dev/clasp/internal/store"
	"github.com/clasp-dev/clasp/internal/store/postgres"
	"github.com/clasp-dev/clasp/internal/store/sqlite"
	"github.com/clasp-dev/clasp/internal/webhook"
)

// benchStores returns, by dialect, a function opening a fresh store
// (PostgreSQL only with CLASP_TEST_POSTGRES_URL): a SQLite file, a fresh
// PostgreSQL database, closed and dropped at the benchmark's end.
func benchStores() map[string]func(b *testing.B) store.Store {
	out := map[string]func(b *testing.B) store.Store{
		"sqlite": func(b *testing.B) store.Store {
			stDrv, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "clasp.db"), sqlite.Options{})
			if err != nil {
				b.Fatal(err)
			}
			st := store.New(stDrv)
			b.Cleanup(func() { st.Close() })
			return st
		},
	}
	if admin := os.Getenv(serveproc.EnvTestPostgresURL); admin != "" {
		out["postgres"] = func(b *testing.B) store.Store {
			ctx := context.Background()
			u, drop, err := serveproc.CreateDatabase(ctx, admin, "clasp_hook_bench")
			if err != nil {
				b.Fatal(err)
			}
			pgDrv, err := postgres.Open(ctx, u, postgres.Options{})
			if err != nil {
				b.Fatal(err)
			}
			pg := store.New(pgDrv)
			b.Cleanup(func() {
				pg.Close()
				_ = drop(context.Background())
			})
			return pg
		}
	}
	return out
}

// BenchmarkDispatch measures, on each store, the deliveries a dispatcher
// sustains (n deliveries of distinct issues written before it starts, to
// a loopback receiver answering 200 at once: deliveries/s), and the delay
// from a change's commit (its create returned) to its delivery's arrival,
// for changes made one after another while it runs (p50, p99).
// Run with -benchtime=1x.
func BenchmarkDispatch(b *testing.B) {
	const n, m = 2000, 300
	for name, open := range benchStores() {
		b.Run(name, func(b *testing.B) {
			st := open(b)
			ctx := context.Background()
			var mu sync.Mutex
			arrived := map[string]time.Time{}
			gotCh := make(chan struct{}, n+m+10)
			rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				now := time.Now()
				mu.Lock()
				arrived[r.Header.Get(clasp.HeaderDelivery)] = now
				mu.Unlock()
				gotCh <- struct{}{}
			}))
			defer rc.Close()
			co, err := st.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "bench", IssuePrefix: "BEN"})
			if err != nil {
				b.Fatal(err)
			}
			w, err := st.WebhookCreate(ctx, &store.WebhookCreateParams{CompanyID: co.ID, URL: rc.URL, Events: []string{"issue.created"}, Secret: "0123456789abcdef"})
			if err != nil {
				b.Fatal(err)
			}
			board := store.Actor{Type: clasp.ActorBoard}
			var wg sync.WaitGroup
			for k := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := k; i < n; i += 8 {
						if _, err := st.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: co.ID, Title: fmt.Sprint("i", i), Actor: board}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ResetTimer()
			start := time.Now()
			d := webhook.New(st, webhook.Config{AllowPrivate: true})
			d.Start(ctx)
			defer d.Stop()
			for range n {
				<-gotCh
			}
			el := time.Since(start)
			b.ReportMetric(float64(n)/el.Seconds(), "deliveries/s")

			// Commit to delivery, one change at a time.
			var lat []time.Duration
			for i := range m {
				iss, err := st.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: co.ID, Title: fmt.Sprint("l", i), Actor: board})
				if err != nil {
					b.Fatal(err)
				}
				committed := time.Now()
				<-gotCh
				ds, _, err := st.WebhookDeliveryList(ctx, w.ID, store.Page{Limit: 1})
				if err != nil || len(ds) == 0 || ds[0].EntityID != iss.ID {
					b.Fatalf("newest delivery: %v %v", ds, err)
				}
				mu.Lock()
				at := arrived[ds[0].ID]
				mu.Unlock()
				lat = append(lat, at.Sub(committed))
			}
			slices.Sort(lat)
			p := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))] }
			b.ReportMetric(float64(p(0.5).Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(p(0.99).Microseconds())/1000, "p99-ms")
		})
	}
}

// BenchmarkCheckoutWhileDeliveriesQueue measures, on each store, the
// latency of a checkout and release (p50, p99 over 300) with no
// subscription, then with 1,000 deliveries queued for a receiver that
// never answers while the dispatcher runs (its 16 workers all waiting):
// the API's writes do not wait for deliveries. Run with -benchtime=1x.
func BenchmarkCheckoutWhileDeliveriesQueue(b *testing.B) {
	const cycles, queued = 300, 1000
	for name, open := range benchStores() {
		b.Run(name, func(b *testing.B) {
			st := open(b)
			ctx := context.Background()
			hang := make(chan struct{})
			rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-hang:
				case <-r.Context().Done():
				}
			}))
			defer rc.Close()
			defer close(hang)
			board := store.Actor{Type: clasp.ActorBoard}
			co, err := st.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "bench", IssuePrefix: "CHK"})
			if err != nil {
				b.Fatal(err)
			}
			ag, err := st.AgentCreate(ctx, &store.AgentCreateParams{CompanyID: co.ID, Name: "a", Actor: board})
			if err != nil {
				b.Fatal(err)
			}
			run, err := st.RunOpen(ctx, &store.RunOpenParams{AgentID: ag.ID, InvocationSource: clasp.InvocationSelf, LeaseTTL: time.Hour,
				TokenHash: "bench-token-hash", Actor: store.Actor{Type: clasp.ActorAgent, AgentID: ag.ID, CompanyID: co.ID}})
			if err != nil {
				b.Fatal(err)
			}
			ra := store.Actor{Type: clasp.ActorAgent, AgentID: ag.ID, CompanyID: co.ID, RunID: run.ID}
			iss, err := st.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: co.ID, Title: "cycled", Status: clasp.IssueTodo, Actor: board})
			if err != nil {
				b.Fatal(err)
			}
			measure := func() (time.Duration, time.Duration) {
				var lat []time.Duration
				for range cycles {
					t0 := time.Now()
					if _, err := st.IssueCheckout(ctx, &store.IssueCheckoutParams{Ref: iss.ID, AgentID: ag.ID,
						ExpectedStatuses: []clasp.IssueStatus{clasp.IssueTodo}, LeaseTTL: time.Hour, Actor: ra}); err != nil {
						b.Fatal(err)
					}
					if _, err := st.IssueRelease(ctx, &store.IssueReleaseParams{Ref: iss.ID, Actor: ra}); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(t0))
				}
				slices.Sort(lat)
				return lat[len(lat)/2], lat[len(lat)*99/100]
			}
			p50, p99 := measure()
			b.ReportMetric(float64(p50.Microseconds())/1000, "idle-p50-ms")
			b.ReportMetric(float64(p99.Microseconds())/1000, "idle-p99-ms")
			if _, err := st.WebhookCreate(ctx, &store.WebhookCreateParams{CompanyID: co.ID, URL: rc.URL, Events: []string{"issue.created"}, Secret: "0123456789abcdef"}); err != nil {
				b.Fatal(err)
			}
			for i := range queued {
				if _, err := st.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: co.ID, Title: fmt.Sprint("q", i), Actor: board}); err != nil {
					b.Fatal(err)
				}
			}
			d := webhook.New(st, webhook.Config{AllowPrivate: true, Timeout: time.Minute})
			d.Start(ctx)
			defer d.Stop()
			p50, p99 = measure()
			b.ReportMetric(float64(p50.Microseconds())/1000, "queued-p50-ms")
			b.ReportMetric(float64(p99.Microseconds())/1000, "queued-p99-ms")
		})
	}
}
