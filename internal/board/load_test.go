package board_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBoardLoad measures (it asserts only consistency, never speed) the
// event rate the board page keeps up with while `clasp swarm` drives a
// server, and the board's load time with 10,000 issues. It runs only with
// CLASP_BOARD_LOAD=1 and logs its figures:
//
//	CLASP_BOARD_LOAD=1 go test -run TestBoardLoad -v ./internal/board/
//
// CLASP_BOARD_LOAD_FILES (default 400) and CLASP_BOARD_LOAD_AGENTS
// (default 8) size the swarm.
func TestBoardLoad(t *testing.T) {
	if os.Getenv("CLASP_BOARD_LOAD") == "" {
		t.Skip("a measurement: set CLASP_BOARD_LOAD=1 to run it")
	}
	exe := needChromium(t)
	bin := binary(t)
	s := startServer(t, bin, t.TempDir(), "127.0.0.1:0")
	b := newBrowser(t, exe)
	b.run(t, chromedp.Navigate(s.url+"/login"), chromedp.WaitVisible(chromedp.CSS("#token")), chromedp.SendKeys(chromedp.CSS("#token"), s.token), chromedp.Click(chromedp.CSS(`button[type="submit"]`)))
	b.waitJS(t, `document.body.dataset.page === "nocompany"`, "")

	// The swarm: one issue per file of a generated tree.
	files := 400
	if v := os.Getenv("CLASP_BOARD_LOAD_FILES"); v != "" {
		fmt.Sscan(v, &files)
	}
	agents := "8"
	if v := os.Getenv("CLASP_BOARD_LOAD_AGENTS"); v != "" {
		agents = v
	}
	tree := t.TempDir()
	for i := range files {
		if err := os.WriteFile(filepath.Join(tree, fmt.Sprintf("f%04d.txt", i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sw := exec.Command(bin, "swarm", "--server", s.url, "--token", s.token, "--dir", tree, "--agents", agents, "--kill-rate", "0.1", "--lease-ttl", leaseTTL, "--json")
	sw.Env = cleanEnv()
	var swOut bytes.Buffer
	sw.Stdout, sw.Stderr = &swOut, &swOut
	start := time.Now()
	if err := sw.Start(); err != nil {
		t.Fatal(err)
	}
	var companies []ident
	for len(companies) == 0 {
		s.api("GET", "/api/companies", s.token, "", nil, 200, &companies)
		time.Sleep(50 * time.Millisecond)
	}
	co := companies[0].ID
	b.visit(t, s, "/?company="+co)
	if err := sw.Wait(); err != nil {
		t.Fatalf("swarm: %v\n%s", err, swOut.String())
	}
	swarmTime := time.Since(start)
	var newest []struct {
		ID int64 `json:"id"`
	}
	s.api("GET", "/api/companies/"+co+"/activity?limit=1", s.token, "", nil, 200, &newest)
	last := newest[0].ID
	b.waitJS(t, fmt.Sprintf(`Number(document.body.dataset.appliedLast) === %d`, last), `document.body.dataset.appliedLast`)
	caught := time.Since(start)
	applied := eval[string](t, b, `document.body.dataset.applied`)
	refreshes := eval[string](t, b, `document.body.dataset.refreshes`)
	// Consistency with the API at the end: the done column's count.
	var done []ident
	s.api("GET", "/api/companies/"+co+"/issues?status=done&limit=1000", s.token, "", nil, 200, &done)
	want := fmt.Sprint(len(done))
	if len(done) > 25 {
		want = "25+"
	}
	b.waitJS(t, `document.querySelector('.column[data-status="done"] [data-count]').textContent === `+js(want), `document.querySelector('.column[data-status="done"] [data-count]').textContent`)
	var n int
	fmt.Sscan(applied, &n)
	t.Logf("swarm: %d issues, %v; the page applied %s events (%.0f events/s over the swarm), caught up with the newest (#%d) %v after the swarm began, in %s fragment refreshes; done count %s as the API",
		files, swarmTime.Round(time.Millisecond), applied, float64(n)/swarmTime.Seconds(), last, caught.Round(time.Millisecond), refreshes, want)

	// 10,000 issues: the board's load time.
	target := 10000
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				body, _ := json.Marshal(map[string]any{"title": fmt.Sprintf("filler %d", i), "status": []string{"backlog", "todo", "in_review", "blocked"}[i%4]})
				req, _ := http.NewRequest("POST", s.url+"/api/companies/"+co+"/issues", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+s.token)
				req.Header.Set("Content-Type", "application/json")
				res, err := http.DefaultClient.Do(req)
				if err != nil || res.StatusCode != 201 {
					mu.Lock()
					t.Errorf("create filler: %v %v", err, res)
					mu.Unlock()
				}
				if res != nil {
					res.Body.Close()
				}
			}
		}()
	}
	for i := range target - files {
		work <- i
	}
	close(work)
	wg.Wait()
	for i := range 3 {
		b.run(t, chromedp.Navigate(s.url+"/?company="+co), chromedp.WaitReady(chromedp.CSS("body")))
		timing := eval[map[string]float64](t, b, `(() => { const n = performance.getEntriesByType("navigation")[0]; return {ttfb: n.responseStart, dcl: n.domContentLoadedEventEnd, load: n.loadEventEnd, cards: document.querySelectorAll(".card").length, nodes: document.getElementsByTagName("*").length}; })()`)
		t.Logf("load %d at %d issues: first byte %.0f ms, DOMContentLoaded %.0f ms, load %.0f ms; %.0f cards, %.0f elements", i+1, target, timing["ttfb"], timing["dcl"], timing["load"], timing["cards"], timing["nodes"])
	}
	if p := b.problems(); len(p) > 0 {
		t.Fatalf("the page reported:\n%s", strings.Join(p, "\n"))
	}
}
