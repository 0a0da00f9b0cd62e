package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/clasp-dev/clasp"
)

// BenchmarkHTTPCheckoutRelease measures checkout+release cycles over real
// loopback HTTP into a SQLite file, at 1, 8 and 32 concurrent clients:
// "uncontended" gives every client its own issue and run; "one-issue" has
// all clients (runs of one agent) race for a single issue, where a 409 is a
// lost race and counts as a cycle too. It reports cycles/s, the share of
// successful checkouts and allocations (of client and server together).
//
//	go test ./internal/httpapi -run '^$' -bench HTTPCheckoutRelease -benchtime 2000x
func BenchmarkHTTPCheckoutRelease(b *testing.B) {
	for _, mode := range []string{"uncontended", "one-issue"} {
		for _, clients := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("%s/clients=%d", mode, clients), func(b *testing.B) {
				benchCheckoutRelease(b, clients, mode == "one-issue", false)
			})
		}
	}
}

// BenchmarkHTTPCheckoutReleasePostgres is BenchmarkHTTPCheckoutRelease
// through the PostgreSQL store (a fresh schema on CLASP_TEST_POSTGRES_URL;
// skipped without it), at 1, 8, 32 and 64 clients. Compare with
// BenchmarkRaw of internal/bench for the raw limit:
//
//	go test ./internal/httpapi -run '^$' -bench HTTPCheckoutReleasePostgres -benchtime 2000x
func BenchmarkHTTPCheckoutReleasePostgres(b *testing.B) {
	for _, mode := range []string{"uncontended", "one-issue"} {
		for _, clients := range []int{1, 8, 32, 64} {
			b.Run(fmt.Sprintf("%s/clients=%d", mode, clients), func(b *testing.B) {
				benchCheckoutRelease(b, clients, mode == "one-issue", true)
			})
		}
	}
}

func benchCheckoutRelease(b *testing.B, clients int, contended, pg bool) {
	bu := setup(b, func(o *setupOpts) { o.postgres = pg })
	c := bu.company("BN")
	a, key := bu.agent(c.ID, "bench")
	tr := bu.hc.Transport.(*http.Transport)
	tr.MaxIdleConnsPerHost = clients
	type worker struct {
		run   *clasp.Run
		issue *clasp.Issue
	}
	shared := bu.issue(c.ID, map[string]any{"status": "todo", "assigneeAgentId": a.ID})
	ws := make([]worker, clients)
	for i := range ws {
		ws[i].run = bu.run(key)
		ws[i].issue = shared
		if !contended {
			ws[i].issue = bu.issue(c.ID, map[string]any{"status": "todo", "assigneeAgentId": a.ID})
		}
	}
	var next, wins atomic.Int64
	var failed atomic.Value
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				res := bu.checkoutNoFatal(w.issue.ID, key, w.run.ID, a.ID)
				switch res {
				case http.StatusOK:
					wins.Add(1)
					if st := bu.releaseNoFatal(w.issue.ID, key, w.run.ID); st != http.StatusOK {
						failed.Store(fmt.Sprintf("release: status %d", st))
						return
					}
				case http.StatusConflict:
					if !contended {
						failed.Store("conflict on an uncontended issue")
						return
					}
				default:
					failed.Store(fmt.Sprintf("checkout: status %d", res))
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if f := failed.Load(); f != nil {
		b.Fatal(f)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
	b.ReportMetric(float64(wins.Load())/float64(b.N), "won/op")
}

// checkoutNoFatal and releaseNoFatal are safe to call from benchmark goroutines.
func (bu *bundle) checkoutNoFatal(issueID, key, runID, agentID string) int {
	return bu.send("POST", "/api/issues/"+issueID+"/checkout", key, runID,
		`{"agentId":"`+agentID+`","expectedStatuses":["todo"]}`)
}

func (bu *bundle) releaseNoFatal(issueID, key, runID string) int {
	return bu.send("POST", "/api/issues/"+issueID+"/release", key, runID, `{}`)
}

func (bu *bundle) send(method, path, key, runID, body string) int {
	hr, err := http.NewRequest(method, bu.ts.URL+path, strings.NewReader(body))
	if err != nil {
		return -1
	}
	hr.Header.Set("Authorization", "Bearer "+key)
	hr.Header.Set(RunIDHeader, runID)
	hr.Header.Set("Content-Type", "application/json")
	res, err := bu.hc.Do(hr)
	if err != nil {
		return -1
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode
}
