package board_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// The browser tests drive Debian's chromium (headless, through chromedp)
// against the real clasp binary, with agents that are real processes
// (`clasp issue checkout` then `clasp run heartbeat` in a loop, SIGKILLed
// as a crashed agent dies). Outside CI they are skipped when chromium is
// not installed; with CI set they fail instead.

const chromiumPath = "/usr/bin/chromium"

// leaseTTL is the servers' lease: short, so that a SIGKILLed agent's lock
// is swept within seconds.
const leaseTTL = "4s"

// waitLimit bounds every wait for the page to show something.
const waitLimit = 60 * time.Second

func needChromium(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("browser tests build the binary and start chromium; skipped with -short")
	}
	p := chromiumPath
	if v := os.Getenv("CLASP_CHROMIUM"); v != "" {
		p = v
	}
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("chromium is not installed at %s: .ci/run installs it (apt-get install chromium); CI must run the browser tests", p)
		}
		t.Skipf("SKIP browser tests: chromium is not installed at %s (apt-get install -y chromium)", p)
	}
	return p
}

// axeSource returns axe-core's script (npm ci in testdata/axe), or "" with
// a skip message outside CI when it is not installed.
func axeSource(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "axe", "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("axe-core is not installed (run npm ci in internal/board/testdata/axe): %v", err)
		}
		t.Logf("SKIP axe scans: axe-core is not installed (npm ci --prefix internal/board/testdata/axe): %v", err)
		return ""
	}
	return string(b)
}

var (
	buildOnce sync.Once
	claspBin  string
	buildErr  error
	buildDir  string
)

func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "clasp-board-bin")
		if buildErr != nil {
			return
		}
		claspBin = filepath.Join(buildDir, "clasp")
		out, err := exec.Command("go", "build", "-o", claspBin, "../../cmd/clasp").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return claspBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// server is one `clasp serve` process.
type server struct {
	t     *testing.T
	bin   string
	dir   string
	addr  string // host:port
	url   string
	token string
	cmd   *exec.Cmd
	done  chan error
	log   *bytes.Buffer
}

func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CLASP_") {
			env = append(env, kv)
		}
	}
	return env
}

// startServer starts clasp serve on listen with data directory dir and
// waits for its banner.
func startServer(t *testing.T, bin, dir, listen string, extra ...string) *server {
	t.Helper()
	args := append([]string{"serve", "--listen", listen, "--data-dir", dir, "--lease-ttl", leaseTTL, "--sweep-interval", "1s"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = cleanEnv()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, bin: bin, dir: dir, cmd: cmd, done: make(chan error, 1), log: &bytes.Buffer{}}
	cmd.Stderr = s.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "clasp listening on "); ok {
				got <- u
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		close(got)
		s.done <- cmd.Wait()
	}()
	u, ok := <-got
	if !ok {
		t.Fatalf("clasp serve exited before listening: %s", s.log)
	}
	s.url = u
	s.addr = strings.TrimPrefix(u, "http://")
	tok, err := os.ReadFile(filepath.Join(dir, "board-token"))
	if err != nil {
		t.Fatal(err)
	}
	s.token = strings.TrimSpace(string(tok))
	t.Cleanup(func() { s.stop() })
	return s
}

// stop ends the server with SIGTERM (a graceful shutdown) and waits.
func (s *server) stop() {
	if s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// api calls the API with bearer token (and run id when not empty) and
// decodes the answer into out; it fails the test on a status other than want.
func (s *server) api(method, path, token, runID string, body any, want int, out any) {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if runID != "" {
		req.Header.Set("X-Clasp-Run-Id", runID)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		s.t.Fatalf("%s %s: %d %s, want %d", method, path, res.StatusCode, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			s.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

// agentProc is a real agent process: it checks issue out (when not empty)
// in its run, then renews the run's lease every half second until killed.
type agentProc struct{ cmd *exec.Cmd }

func startAgent(t *testing.T, s *server, key, runID, issue string) *agentProc {
	t.Helper()
	script := `if [ -n "$1" ]; then "$0" issue checkout "$1" >/dev/null || exit 4; fi
while :; do "$0" run heartbeat >/dev/null || exit 3; sleep 0.5; done`
	cmd := exec.Command("/bin/sh", "-c", script, s.bin, issue)
	cmd.Env = append(cleanEnv(), "CLASP_URL="+s.url, "CLASP_TOKEN="+key, "CLASP_RUN_ID="+runID)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a := &agentProc{cmd: cmd}
	t.Cleanup(a.kill)
	return a
}

// kill SIGKILLs the agent's whole process group and reaps it.
func (a *agentProc) kill() {
	if a.cmd.ProcessState != nil {
		return
	}
	_ = syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
	_ = a.cmd.Wait()
}

// browser is one headless chromium with the problems its pages reported.
type browser struct {
	ctx    context.Context
	mu     sync.Mutex
	issues []string // console errors, exceptions, CSP violations, alerts
}

func (b *browser) report(s string) {
	b.mu.Lock()
	b.issues = append(b.issues, s)
	b.mu.Unlock()
}

func (b *browser) problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.issues...)
}

func newBrowser(t *testing.T, exe string) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	b := &browser{}
	var dialogs = make(chan struct{}, 16)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithListener(func(ev any) {
		if e, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			b.report("a JavaScript dialog opened: " + e.Message)
			select {
			case dialogs <- struct{}{}:
			default:
			}
		}
	}))
	t.Cleanup(func() { cancel(); cancelA() })
	b.ctx = ctx
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	go func() {
		for range dialogs {
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			// Failed loads are the expected failures of the event stream
			// while the server restarts and the 401 of a bad sign-in;
			// every other error (a CSP violation is one) is a problem.
			if m.Type != chromedp.ConsoleError && m.Type != chromedp.ConsoleException {
				continue
			}
			if strings.Contains(m.Text, "Failed to load resource") || strings.Contains(m.Text, "net::ERR_") {
				continue
			}
			b.report(m.String() + " at " + m.URL)
		}
	}()
	return b
}

func (b *browser) run(t *testing.T, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitLimit+30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

// waitJS waits until the expression is truthy (fails after waitLimit,
// reporting the expression and, when given, the value of describe).
func (b *browser) waitJS(t *testing.T, expr string, describe string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitLimit+5*time.Second)
	defer cancel()
	deadline := time.Now().Add(waitLimit)
	var err error
	for {
		_, err = chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(time.Until(deadline))))
		// A navigation (a form post, a redirect) ends the page the poll
		// ran in: poll again in the new one.
		if err == nil || time.Now().After(deadline) || !(strings.Contains(err.Error(), "context with specified id") || strings.Contains(err.Error(), "context was destroyed") || strings.Contains(err.Error(), "navigated or closed")) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		got := ""
		if describe != "" {
			got, _ = chromedp.Run(b.ctx, chromedp.Evaluate[string](describe))
		}
		t.Fatalf("waiting for %s: %v; page shows: %s", expr, err, got)
	}
}

// eval evaluates expr and decodes its value into T.
func eval[T any](t *testing.T, b *browser, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitLimit)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func (b *browser) shot(t *testing.T, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitLimit)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// visit opens path and waits for the live layer's connection (on pages of a company).
func (b *browser) visit(t *testing.T, s *server, path string) {
	t.Helper()
	b.run(t, chromedp.Navigate(s.url+path), chromedp.WaitReady(chromedp.CSS("body")))
	b.waitJS(t, `!document.getElementById("conn") || document.getElementById("conn").dataset.state === "live"`, `document.body.innerText.slice(0,300)`)
}

// confirm clicks the dialog's Confirm button once the dialog is open.
func (b *browser) confirm(t *testing.T) {
	t.Helper()
	b.waitJS(t, `document.getElementById("confirm").open`, "")
	b.run(t, chromedp.Click(chromedp.CSS("#confirm-ok")))
}

func artifactsDir(t *testing.T) string {
	dir := os.Getenv("CLASP_BOARD_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", "artifacts", "board")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func js(s string) string { b, _ := json.Marshal(s); return string(b) }

type ident struct {
	ID         string `json:"id"`
	Identifier string `json:"identifier"`
	Token      string `json:"token"`
}

// TestBrowser drives the board through its whole story in one chromium and
// one server (started once: the machine is small), each step a subtest.
func TestBrowser(t *testing.T) {
	exe := needChromium(t)
	axe := axeSource(t)
	bin := binary(t)
	dir := t.TempDir()
	s := startServer(t, bin, dir, "127.0.0.1:0")
	b := newBrowser(t, exe)
	outer := t
	// step runs one subtest; the story stops at the first that fails (the
	// later steps build on it). The server's API helper reports to it.
	step := func(name string, f func(t *testing.T)) {
		if !outer.Run(name, func(t *testing.T) { s.t = t; f(t) }) {
			outer.FailNow()
		}
	}

	var co, builder, reviewer, key ident
	s.api("POST", "/api/companies", s.token, "", map[string]any{"name": "Acme", "issuePrefix": "ACM"}, 201, &co)
	s.api("POST", "/api/companies/"+co.ID+"/agents", s.token, "", map[string]any{"name": "builder"}, 201, &builder)
	s.api("POST", "/api/companies/"+co.ID+"/agents", s.token, "", map[string]any{"name": "reviewer"}, 201, &reviewer)
	s.api("POST", "/api/agents/"+builder.ID+"/keys", s.token, "", map[string]any{}, 201, &key)
	q := "?company=" + co.ID
	openRun := func() string {
		var r ident
		s.api("POST", "/api/agents/me/runs", key.Token, "", map[string]any{}, 201, &r)
		return r.ID
	}
	createIssue := func(title string) ident {
		var i ident
		s.api("POST", "/api/companies/"+co.ID+"/issues", s.token, "", map[string]any{"title": title, "status": "todo"}, 201, &i)
		return i
	}
	cardSel := func(identifier string) string {
		return `document.querySelector('.card[data-issue="` + identifier + `"]')`
	}

	step("SignIn", func(t *testing.T) {
		b.run(t, chromedp.Navigate(s.url+"/"), chromedp.WaitVisible(chromedp.CSS("#token")))
		b.shot(t, filepath.Join(artifactsDir(t), "login.png"))
		b.run(t, chromedp.SendKeys(chromedp.CSS("#token"), "clasp_bt_not-the-token"), chromedp.Submit(chromedp.CSS("#token")))
		b.waitJS(t, `!!document.getElementById("login-error")`, `document.body.innerText`)
		msg := eval[string](t, b, `document.getElementById("login-error").textContent`)
		if !strings.Contains(msg, "not the board token") {
			t.Fatalf("bad token message = %q", msg)
		}
		b.run(t, chromedp.WaitVisible(chromedp.CSS("#token")), chromedp.SendKeys(chromedp.CSS("#token"), s.token), chromedp.Submit(chromedp.CSS("#token")))
		b.waitJS(t, `document.body.dataset.page === "board"`, `document.body.innerText.slice(0,300)`)
		b.waitJS(t, `document.getElementById("conn").dataset.state === "live"`, "")
		cookie := eval[string](t, b, `document.cookie`)
		if strings.Contains(cookie, "clasp_board") {
			t.Fatalf("the board cookie is readable from script: %q", cookie)
		}
	})

	step("CreateInPageRendersTitleAsText", func(t *testing.T) {
		b.visit(t, s, "/"+q)
		title := `<img src=x onerror=alert(1)>`
		b.run(t, chromedp.SendKeys(chromedp.CSS("#new-title"), title), chromedp.Click(chromedp.CSS(`#create-issue button[type="submit"]`)))
		b.confirm(t)
		b.waitJS(t, `[...document.querySelectorAll(".card .title")].some(e => e.textContent === `+js(title)+`)`, `document.querySelector(".columns").innerText`)
		imgs := eval[int](t, b, `document.querySelectorAll(".card img, #feed img").length`)
		if imgs != 0 {
			t.Fatalf("the title became markup: %d img elements in the cards", imgs)
		}
		// The success message is not in the error style.
		msg := `document.querySelector("#create-issue output.msg")`
		b.waitJS(t, msg+`.textContent === "Done."`, msg+`.textContent`)
		done, bad := eval[string](t, b, `getComputedStyle(`+msg+`).color`), eval[string](t, b, `(() => { const p = document.createElement("p"); p.className = "error"; document.body.append(p); const c = getComputedStyle(p).color; p.remove(); return c })()`)
		if done == bad {
			t.Fatalf(`"Done." is shown in the error colour %s`, bad)
		}
	})

	step("CreatedThroughAPIAppearsWithoutReload", func(t *testing.T) {
		b.visit(t, s, "/"+q)
		eval[chromedp.Void](t, b, `window.__noReload = 1`)
		iss := createIssue("made through the API")
		b.waitJS(t, cardSel(iss.Identifier)+` !== null`, `document.querySelector(".columns").innerText`)
		marker := eval[int](t, b, `window.__noReload || 0`)
		if marker != 1 {
			t.Fatal("the page reloaded")
		}
	})

	lockIssue := createIssue("held by builder")
	lockRun := openRun()
	var holder *agentProc
	step("CheckoutShowsHolderEpochLease", func(t *testing.T) {
		b.visit(t, s, "/"+q)
		holder = startAgent(t, s, key.Token, lockRun, lockIssue.Identifier)
		chip := cardSel(lockIssue.Identifier) + `?.querySelector(".lock")`
		b.waitJS(t, chip+`?.dataset.liveness === "live"`, cardSel(lockIssue.Identifier)+`?.innerText || "no card"`)
		b.waitJS(t, chip+`.querySelector(".lease-left").textContent.endsWith("left") && `+chip+`.querySelector("meter").value > 0`, chip+`.innerText`)
		text := eval[string](t, b, chip+`.innerText`)
		link := eval[string](t, b, chip+`.querySelector("a")?.getAttribute("href") || ""`)
		if !strings.Contains(text, "builder") || !strings.Contains(text, "epoch 1") || !strings.HasPrefix(link, "/runs/"+lockRun+"?") {
			t.Fatalf("lock chip = %q linking to %q, want the holder run (linked), builder and epoch 1", text, link)
		}
	})

	step("ConflictNamesHolder", func(t *testing.T) {
		b.visit(t, s, "/issues/"+lockIssue.Identifier+q)
		b.waitJS(t, `document.getElementById("lock-liveness")?.textContent === "live"`, `document.getElementById("lock-panel").innerText`)
		b.run(t, chromedp.SetValue(chromedp.CSS(`#checkout select[name="agentId"]`), reviewer.ID), chromedp.Click(chromedp.CSS(`#checkout button[type="submit"]`)))
		b.confirm(t)
		b.waitJS(t, `!document.getElementById("confirm-error").hidden`, "")
		msg := eval[string](t, b, `document.getElementById("confirm-error").textContent`)
		if !strings.Contains(msg, "409") || !strings.Contains(msg, lockRun) || !strings.Contains(msg, "builder") {
			t.Fatalf("409 message = %q, want it to name run %s and agent builder", msg, lockRun)
		}
		b.run(t, chromedp.Click(chromedp.CSS("#confirm-cancel")))
		b.waitJS(t, `!document.getElementById("confirm").open`, "")
	})

	step("ForceRelease", func(t *testing.T) {
		b.visit(t, s, "/issues/"+lockIssue.Identifier+q)
		b.run(t, chromedp.Click(chromedp.CSS(`#force-release button[type="submit"]`)))
		b.waitJS(t, `document.querySelector("#force-release output").textContent.includes("required")`, "")
		open := eval[bool](t, b, `document.getElementById("confirm").open`)
		if open {
			t.Fatal("an empty reason reached the confirmation")
		}
		b.run(t, chromedp.SendKeys(chromedp.CSS("#fr-reason"), "stuck in the browser test"), chromedp.Click(chromedp.CSS(`#force-release button[type="submit"]`)))
		b.waitJS(t, `document.getElementById("confirm").open`, "")
		warn := eval[string](t, b, `document.getElementById("confirm-warn").textContent`)
		if !strings.Contains(warn, "live") || !strings.Contains(warn, "epoch 1") {
			t.Fatalf("force-release warning = %q, want the live holder and epoch 1", warn)
		}
		b.run(t, chromedp.Click(chromedp.CSS("#confirm-ok")))
		row := `document.querySelector('tr[data-action="issue.admin_force_release"]')`
		b.waitJS(t, row+` !== null`, `document.getElementById("live").innerText.slice(-800)`)
		text := eval[string](t, b, row+`.innerText`)
		if !strings.Contains(text, "saying “stuck in the browser test”") || !strings.Contains(text, "the board") {
			t.Fatalf("force-release activity = %q, want the reason and the board as actor", text)
		}
		b.waitJS(t, `document.getElementById("lock-none") !== null`, `document.getElementById("lock-panel").innerText`)
		holder.kill()
	})

	step("EditAndComment", func(t *testing.T) {
		iss := createIssue("to be edited")
		b.visit(t, s, "/issues/"+iss.Identifier+q)
		b.run(t, chromedp.SetValue(chromedp.CSS(`#edit-issue select[name="status"]`), "blocked"), chromedp.Click(chromedp.CSS(`#edit-issue button[type="submit"]`)))
		b.confirm(t)
		b.waitJS(t, `document.getElementById("issue-status").textContent === "blocked"`, `document.getElementById("issue-status").textContent`)
		body := `<script>alert("comment")</script> done`
		b.run(t, chromedp.SendKeys(chromedp.CSS(`#comment textarea`), body), chromedp.Click(chromedp.CSS(`#comment button[type="submit"]`)))
		b.confirm(t)
		b.waitJS(t, `[...document.querySelectorAll(".comments .body")].some(e => e.textContent === `+js(body)+`)`, `document.querySelector(".comments").innerText`)
		if n := eval[int](t, b, `document.querySelectorAll(".comments script").length`); n != 0 {
			t.Fatalf("the comment became markup: %d script elements", n)
		}
	})

	step("KilledAgentLockSwept", func(t *testing.T) {
		iss := createIssue("its agent dies")
		run := openRun()
		b.visit(t, s, "/"+q)
		ag := startAgent(t, s, key.Token, run, iss.Identifier)
		b.waitJS(t, cardSel(iss.Identifier)+`?.querySelector('.lock[data-liveness="live"]') != null`, cardSel(iss.Identifier)+`?.innerText || "no card"`)
		ag.kill()
		b.waitJS(t, cardSel(iss.Identifier)+`?.querySelector(".swept") != null && `+cardSel(iss.Identifier)+`.querySelector(".lock") == null`, cardSel(iss.Identifier)+`?.innerText`)
		b.waitJS(t, `document.querySelector('#feed li[data-action="issue.stale_lock_cleared"]') !== null`, `document.getElementById("feed").innerText`)
	})

	step("RestartResumesExactlyOnce", func(t *testing.T) {
		b.visit(t, s, "/"+q)
		s.stop()
		b.waitJS(t, `document.getElementById("conn").dataset.state === "down" && !document.getElementById("stale").hidden`, `document.getElementById("conn").textContent`)
		s2 := startServer(outer, bin, dir, s.addr)
		*s = *s2
		s.t = t
		missed := []ident{createIssue("missed while away 1"), createIssue("missed while away 2")}
		for _, m := range missed {
			b.waitJS(t, cardSel(m.Identifier)+` !== null`, `document.querySelector(".columns").innerText`)
		}
		b.waitJS(t, `document.getElementById("conn").dataset.state === "live" && document.getElementById("stale").hidden`, "")
		for _, m := range missed {
			b.waitJS(t, `[...document.querySelectorAll("#feed li")].filter(li => li.textContent.includes("missed while away")).length === 2`, `document.getElementById("feed").innerText`)
			var cards, feed int
			cards = eval[int](t, b, `document.querySelectorAll('.card[data-issue="`+m.Identifier+`"]').length`)
			feed = eval[int](t, b, `[...document.querySelectorAll("#feed li")].filter(li => li.dataset.action === "issue.created" && li.textContent.includes(`+js(titleOf(m, missed))+`)).length`)
			if cards != 1 || feed != 1 {
				t.Fatalf("%s: %d cards and %d feed entries, want exactly 1 of each", m.Identifier, cards, feed)
			}
		}
		dup := eval[bool](t, b, `(() => { const ids = [...document.querySelectorAll("#feed li")].map(li => li.dataset.id); return new Set(ids).size !== ids.length })()`)
		if dup {
			t.Fatal("an event was applied twice")
		}
	})

	step("CancelRun", func(t *testing.T) {
		run := openRun()
		ag := startAgent(t, s, key.Token, run, "")
		defer ag.kill()
		b.visit(t, s, "/runs"+q)
		btn := `tr[data-run="` + run + `"] button.action-btn`
		b.waitJS(t, `document.querySelector('`+btn+`') !== null`, `document.getElementById("live").innerText`)
		b.run(t, chromedp.Click(chromedp.CSS(btn)))
		b.confirm(t)
		b.waitJS(t, `document.getElementById("recent-h").parentElement.querySelector('tr[data-run="`+run+`"]')?.innerText.includes("cancelled")`, `document.getElementById("live").innerText`)
	})

	step("RunLogOpensAtItsEnd", func(t *testing.T) {
		var logger ident
		s.api("POST", "/api/companies/"+co.ID+"/agents", s.token, "", map[string]any{"name": "logger"}, 201, &logger)
		s.api("PATCH", "/api/agents/"+logger.ID, s.token, "", map[string]any{"adapter": map[string]any{
			"type": "process", "command": "/bin/sh", "args": []string{"-c", "i=0; while [ $i -lt 400 ]; do i=$((i+1)); echo line $i; done"},
		}}, 200, nil)
		var wake struct {
			RunID string `json:"runId"`
		}
		s.api("POST", "/api/agents/"+logger.ID+"/wakeup", s.token, "", map[string]any{}, 202, &wake)
		if wake.RunID == "" {
			t.Fatal("the wake started no run")
		}
		b.visit(t, s, "/runs"+q)
		btn := `tr[data-run="` + wake.RunID + `"] button.log-toggle`
		b.waitJS(t, `document.getElementById("recent-h").parentElement.querySelector('`+btn+`') !== null`, `document.getElementById("live").innerText`)
		b.run(t, chromedp.Click(chromedp.CSS(btn)))
		pre := `document.querySelector('tr[data-run="` + wake.RunID + `"] + tr pre.log')`
		b.waitJS(t, pre+`?.textContent.includes("line 400")`, pre+`?.textContent.slice(-200)`)
		b.waitJS(t, pre+`.scrollHeight > `+pre+`.clientHeight && `+pre+`.scrollTop + `+pre+`.clientHeight >= `+pre+`.scrollHeight - 4`,
			`"scrollTop " + `+pre+`.scrollTop + " of " + `+pre+`.scrollHeight`)
	})

	step("PauseResumeKeys", func(t *testing.T) {
		b.visit(t, s, "/agents"+q)
		sec := `section[data-agent="reviewer"]`
		b.run(t, chromedp.Click(chromedp.CSS(sec+` button[data-body*="paused"]`)))
		b.confirm(t)
		b.waitJS(t, `document.querySelector('`+sec+` [data-agent-status]').textContent === "paused"`, "")
		b.run(t, chromedp.Click(chromedp.CSS(sec+` button[data-body*="active"]`)))
		b.confirm(t)
		b.waitJS(t, `document.querySelector('`+sec+` [data-agent-status]').textContent === "active"`, "")
		b.run(t, chromedp.Click(chromedp.CSS(sec+` button[data-show="token"]`)))
		b.confirm(t)
		b.waitJS(t, `document.getElementById("confirm-secret").textContent.startsWith("clasp_ak_") && !document.getElementById("confirm-result").hidden`, `document.getElementById("confirm").innerText`)
		b.run(t, chromedp.Click(chromedp.CSS("#confirm-cancel")))
		b.waitJS(t, `!document.getElementById("confirm").open && document.querySelectorAll('`+sec+` tr[data-key]').length === 1`, "")
		b.run(t, chromedp.Click(chromedp.CSS(sec+` tr[data-key] button.action-btn`)))
		b.confirm(t)
		b.waitJS(t, `document.querySelector('`+sec+` tr[data-key]').children[3].textContent !== "—"`, `document.querySelector('`+sec+`').innerText`)
	})

	step("KeyboardOnly", func(t *testing.T) {
		b.visit(t, s, "/"+q)
		for i := 0; ; i++ {
			id := eval[string](t, b, `document.activeElement ? document.activeElement.id : ""`)
			if id == "new-title" {
				break
			}
			if i > 60 {
				t.Fatal("Tab never reached the new-issue field")
			}
			b.run(t, chromedp.KeyEvent(kb.Tab))
		}
		b.run(t, chromedp.KeyEvent("typed at the keyboard"), chromedp.KeyEvent(kb.Enter))
		b.waitJS(t, `document.getElementById("confirm").open && document.activeElement.id === "confirm-ok"`, "")
		b.run(t, chromedp.KeyEvent(kb.Enter))
		b.waitJS(t, `[...document.querySelectorAll(".card .title")].some(e => e.textContent === "typed at the keyboard")`, `document.querySelector(".columns").innerText`)
	})

	step("WebhookCreateShowsSecretOnce", func(t *testing.T) {
		b.visit(t, s, "/webhooks"+q)
		b.run(t, chromedp.SendKeys(chromedp.CSS("#wh-url"), "https://hooks.example.com/board"), chromedp.Click(chromedp.CSS(`#create-webhook button[type="submit"]`)))
		b.confirm(t)
		msg := `document.querySelector("#create-webhook output.msg")`
		b.waitJS(t, msg+`.textContent.includes("whsec_")`, msg+`.textContent`)
		b.waitJS(t, `[...document.querySelectorAll("section.webhook h2 code")].some(e => e.textContent === "https://hooks.example.com/board")`, `document.getElementById("live").innerText`)
	})

	// The screenshots show a lock held by a live agent process.
	shown := createIssue("shown locked in the screenshots")
	shownAgent := startAgent(t, s, key.Token, openRun(), shown.Identifier)
	defer shownAgent.kill()
	pages := []struct{ name, path string }{
		{"board", "/" + q}, {"issue", "/issues/" + shown.Identifier + q}, {"runs", "/runs" + q},
		{"agents", "/agents" + q}, {"locks", "/locks" + q}, {"activity", "/activity" + q},
		{"attention", "/attention" + q}, {"webhooks", "/webhooks" + q},
	}
	art := artifactsDir(t)
	step("PagesAxeAndScreenshots", func(t *testing.T) {
		for _, p := range pages {
			b.visit(t, s, p.path)
			if p.name == "board" {
				b.waitJS(t, cardSel(shown.Identifier)+`?.querySelector('.lock[data-liveness="live"]') != null`, "")
			}
			b.shot(t, filepath.Join(art, p.name+".png"))
			if axe == "" {
				continue
			}
			eval[chromedp.Void](t, b, axe)
			ctx, cancel := context.WithTimeout(b.ctx, waitLimit)
			found, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`axe.run(document).then(r => r.passes.length === 0 ? ["axe checked nothing"] : r.violations.filter(v => v.impact === "serious" || v.impact === "critical").map(v => v.id + " (" + v.impact + "): " + v.help + " at " + v.nodes.slice(0, 3).map(n => n.target.join(" ")).join("; ")))`, chromedp.EvalAwaitPromise))
			cancel()
			if err != nil {
				t.Fatalf("axe on %s: %v", p.name, err)
			}
			if len(found) > 0 {
				t.Errorf("axe on %s: %s", p.name, strings.Join(found, "\n"))
			}
		}
	})

	step("Narrow390NoHorizontalScroll", func(t *testing.T) {
		b.run(t, chromedp.EmulateViewport(390, 844))
		defer b.run(t, chromedp.EmulateViewport(1280, 900))
		pages = append(pages, struct{ name, path string }{"login", "/login"})
		for _, p := range pages {
			if p.name == "login" {
				b.run(t, chromedp.Navigate(s.url+"/login"), chromedp.WaitReady(chromedp.CSS("body"))) // signed in: the board
			} else {
				b.visit(t, s, p.path)
			}
			var sw, iw int
			sw = eval[int](t, b, `document.documentElement.scrollWidth`)
			iw = eval[int](t, b, `window.innerWidth`)
			b.shot(t, filepath.Join(art, p.name+"-390.png"))
			if sw > iw {
				t.Errorf("%s at 390 px: scrollWidth %d > %d (horizontal scroll)", p.name, sw, iw)
			}
			if p.name == "issue" {
				// The history (and the runs) read at 390 px: no cell
				// squeezed to a few letters a line, and nothing to
				// scroll sideways.
				narrow := eval[[]string](t, b, `[...document.querySelectorAll("table.activity tbody td, #issue-runs tbody td")].filter(td => td.getBoundingClientRect().width < 150).map(td => td.cellIndex + ": " + td.textContent.trim() + " (" + Math.round(td.getBoundingClientRect().width) + " px)").slice(0, 5)`)
				if len(narrow) > 0 {
					t.Errorf("issue page at 390 px: history cells narrower than 150 px: %s", strings.Join(narrow, "; "))
				}
				box := eval[[]int](t, b, `(() => { const s = document.querySelector("table.activity").closest(".scroll"); return [s.scrollWidth, s.clientWidth] })()`)
				if box[0] > box[1] {
					t.Errorf("issue page at 390 px: the history scrolls sideways (%d > %d px)", box[0], box[1])
				}
			}
		}
	})

	step("NoConsoleErrorsOrCSPViolations", func(t *testing.T) {
		if p := b.problems(); len(p) > 0 {
			t.Fatalf("the pages reported:\n%s", strings.Join(p, "\n"))
		}
	})
}

func titleOf(m ident, all []ident) string {
	for i, x := range all {
		if x.ID == m.ID {
			return fmt.Sprintf("missed while away %d", i+1)
		}
	}
	return m.Identifier
}
