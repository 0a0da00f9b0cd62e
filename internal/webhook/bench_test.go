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

// benchStores opens a fresh store of each dialect (PostgreSQL only with
// CLASP_TEST_POSTGRES_URL): a SQLite file, a fresh PostgreSQL database.
func benchStores(b *testing.B) map[string]store.Store {
	ctx := context.Background()
	out := map[string]store.Store{}
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "clasp.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	out["sqlite"] = st
	if admin := os.Getenv(serveproc.EnvTestPostgresURL); admin != "" {
		u, drop, err := serveproc.CreateDatabase(ctx, admin, "clasp_hook_bench")
		if err != nil {
			b.Fatal(err)
		}
		pg, err := postgres.Open(ctx, u, postgres.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			pg.Close()
			_ = drop(context.Background())
		})
		out["postgres"] = pg
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
	for name, st := range benchStores(b) {
		b.Run(name, func(b *testing.B) {
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
