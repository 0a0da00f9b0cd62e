package board_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// setTheme makes the page's prefers-color-scheme theme ("light" or "dark").
func (b *browser) setTheme(t *testing.T, theme string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitLimit)
	defer cancel()
	if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: theme}},
	}); err != nil {
		t.Fatalf("emulate prefers-color-scheme %s: %v", theme, err)
	}
}

// axeSerious runs axe-core (its source axe) on the page and returns its
// serious and critical violations.
func (b *browser) axeSerious(t *testing.T, axe string) []string {
	t.Helper()
	eval[chromedp.Void](t, b, axe)
	ctx, cancel := context.WithTimeout(b.ctx, waitLimit)
	defer cancel()
	found, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`axe.run(document).then(r => r.passes.length === 0 ? ["axe checked nothing"] : r.violations.filter(v => v.impact === "serious" || v.impact === "critical").map(v => v.id + " (" + v.impact + "): " + v.help + " at " + v.nodes.slice(0, 3).map(n => n.target.join(" ")).join("; ")))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("axe: %v", err)
	}
	return found
}

// press sends keys to the focused element, one key event each.
func (b *browser) press(t *testing.T, keys ...string) {
	t.Helper()
	for _, k := range keys {
		b.run(t, chromedp.KeyEvent(k))
	}
}

// tabTo presses Tab until the focused element matches the CSS selector sel.
func (b *browser) tabTo(t *testing.T, sel string) {
	t.Helper()
	for i := 0; ; i++ {
		if eval[bool](t, b, `!!document.activeElement && document.activeElement.matches(`+js(sel)+`)`) {
			return
		}
		if i > 80 {
			t.Fatalf("Tab never reached %s (at %s)", sel, eval[string](t, b, `document.activeElement ? document.activeElement.outerHTML.slice(0, 200) : "nothing"`))
		}
		b.press(t, kb.Tab)
	}
}

// TestBoardThemesWidthsAndKeys: every page of the board, in the light and
// the dark theme, at 390 and 1400 px, has no horizontal overflow and no
// serious or critical axe-core violation (the dark theme really applies);
// an issue's History names its agent and issue as links, never by id
// tails; the shortcuts work and are ignored while typing; and an issue is
// created, checked out for an agent and force-released with the keyboard
// alone. With CLASP_BOARD_SCREENSHOTS set, every page is saved there in
// both themes and widths.
func TestBoardThemesWidthsAndKeys(t *testing.T) {
	exe := needChromium(t)
	axe := axeSource(t)
	bin := binary(t)
	s := startServer(t, bin, t.TempDir(), "127.0.0.1:0")
	b := newBrowser(t, exe)
	shots := os.Getenv("CLASP_BOARD_SCREENSHOTS")
	if shots != "" {
		if err := os.MkdirAll(shots, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	backgrounds := map[string]string{}
	// check opens path at the current theme and width and checks it: no
	// horizontal overflow, and (at 1400 px) no serious axe violation.
	check := func(t *testing.T, name, path, theme string, width int64) {
		t.Helper()
		b.run(t, chromedp.Navigate(s.url+path), chromedp.WaitReady(chromedp.CSS("body")))
		b.waitJS(t, `!document.getElementById("conn") || document.getElementById("conn").dataset.state === "live" || document.body.dataset.page === "error"`, `document.body.innerText.slice(0,300)`)
		backgrounds[theme] = eval[string](t, b, `getComputedStyle(document.body).backgroundColor`)
		if shots != "" {
			b.shot(t, filepath.Join(shots, fmt.Sprintf("%s-%s-%d.png", name, theme, width)))
		}
		wide := eval[[]int](t, b, `[document.scrollingElement.scrollWidth, document.scrollingElement.clientWidth]`)
		if wide[0] > wide[1] {
			over := eval[string](t, b, `[...document.querySelectorAll("body *")].filter(e => e.getBoundingClientRect().right > document.scrollingElement.clientWidth + 1).slice(0, 3).map(e => e.tagName + "." + e.className).join(", ")`)
			t.Errorf("%s, %s, %d px: scrollWidth %d > clientWidth %d (overflowing: %s)", name, theme, width, wide[0], wide[1], over)
		}
		if axe != "" && width == 1400 {
			if found := b.axeSerious(t, axe); len(found) > 0 {
				t.Errorf("axe on %s (%s): %s", name, theme, strings.Join(found, "\n"))
			}
		}
	}
	each := func(t *testing.T, f func(t *testing.T, theme string, width int64)) {
		for _, theme := range []string{"light", "dark"} {
			b.setTheme(t, theme)
			for _, width := range []int64{390, 1400} {
				b.run(t, chromedp.EmulateViewport(width, 900))
				f(t, theme, width)
			}
		}
		b.setTheme(t, "light")
		b.run(t, chromedp.EmulateViewport(1280, 900))
	}
	t.Run("SignInPage", func(t *testing.T) {
		each(t, func(t *testing.T, theme string, width int64) { check(t, "login", "/login", theme, width) })
	})
	b.run(t, chromedp.Navigate(s.url+"/login"), chromedp.WaitVisible(chromedp.CSS("#token")), chromedp.SendKeys(chromedp.CSS("#token"), s.token), chromedp.Submit(chromedp.CSS("#token")))
	b.waitJS(t, `document.body.dataset.page === "nocompany"`, `document.body.innerText.slice(0,300)`)
	t.Run("NoCompanyPage", func(t *testing.T) {
		each(t, func(t *testing.T, theme string, width int64) { check(t, "nocompany", "/", theme, width) })
	})

	var co, builder, key, held, released, run ident
	s.api("POST", "/api/companies", s.token, "", map[string]any{"name": "Acme", "issuePrefix": "ACME"}, 201, &co)
	s.api("POST", "/api/companies/"+co.ID+"/agents", s.token, "", map[string]any{"name": "builder"}, 201, &builder)
	s.api("POST", "/api/agents/"+builder.ID+"/keys", s.token, "", map[string]any{}, 201, &key)
	s.api("POST", "/api/companies/"+co.ID+"/issues", s.token, "", map[string]any{"title": "Held by a live agent", "status": "todo", "priority": "high"}, 201, &held)
	s.api("POST", "/api/companies/"+co.ID+"/issues", s.token, "", map[string]any{"title": "Checked out, then force-released", "status": "todo"}, 201, &released)
	s.api("POST", "/api/agents/me/runs", key.Token, "", map[string]any{}, 201, &run)
	s.api("POST", "/api/issues/"+released.Identifier+"/checkout", key.Token, run.ID, map[string]any{"agentId": builder.ID, "expectedStatuses": []string{"todo"}}, 200, nil)
	s.api("POST", "/api/issues/"+released.Identifier+"/admin/force-release", s.token, "", map[string]any{"reason": "shown in the History"}, 200, nil)
	startAgent(t, s, key.Token, run.ID, held.Identifier)
	q := "?company=" + co.ID

	b.visit(t, s, "/"+q)
	b.waitJS(t, `document.querySelector('.card[data-issue="`+held.Identifier+`"] .lock[data-liveness="live"]') !== null`, `document.querySelector(".columns").innerText`)

	pages := []struct{ name, path string }{
		{"board", "/" + q}, {"issue", "/issues/" + released.Identifier + q}, {"issue-held", "/issues/" + held.Identifier + q},
		{"run", "/runs/" + run.ID + q}, {"runs", "/runs" + q}, {"agents", "/agents" + q}, {"locks", "/locks" + q},
		{"activity", "/activity" + q}, {"not-found", "/issues/ACME-999" + q},
	}
	t.Run("Pages", func(t *testing.T) {
		each(t, func(t *testing.T, theme string, width int64) {
			for _, p := range pages {
				check(t, p.name, p.path, theme, width)
			}
		})
	})
	if backgrounds["light"] == backgrounds["dark"] {
		t.Errorf("the dark theme does not apply: the page's background is %s in both", backgrounds["light"])
	}

	t.Run("HistoryNamesNotIDs", func(t *testing.T) {
		b.visit(t, s, "/issues/"+released.Identifier+q)
		hist := `document.getElementById("hist-h").parentElement`
		text := eval[string](t, b, `(() => { const c = `+hist+`.cloneNode(true); c.querySelectorAll("details").forEach(d => d.remove()); return c.innerText })()`)
		if m := idTail.FindAllString(text, 3); len(m) > 0 {
			t.Errorf("the History shows id tails %q:\n%s", m, text)
		}
		links := eval[[]string](t, b, `[...`+hist+`.querySelectorAll("td a")].map(a => a.textContent + " " + a.getAttribute("href"))`)
		all := strings.Join(links, "\n")
		if !strings.Contains(all, released.Identifier+" /issues/"+released.Identifier+"?") || !strings.Contains(all, "builder /agents?company="+co.ID+"#ag-"+builder.ID) || !strings.Contains(all, "/runs/"+run.ID+"?") {
			t.Errorf("the History does not link the issue, the agent and the run:\n%s", all)
		}
		if !strings.Contains(text, "checked out "+released.Identifier+" at epoch 1 for builder") || !strings.Contains(text, "force-released "+released.Identifier) {
			t.Errorf("the History does not read as sentences:\n%s", text)
		}
		b.run(t, chromedp.Click(chromedp.CSS(`tr[data-action="issue.admin_force_release"] details summary`)))
		raw := eval[string](t, b, `document.querySelector('tr[data-action="issue.admin_force_release"] details pre').innerText`)
		if !strings.Contains(raw, `"reason": "shown in the History"`) {
			t.Errorf("the raw JSON of the force-release = %q", raw)
		}
	})

	t.Run("Shortcuts", func(t *testing.T) {
		b.visit(t, s, "/runs"+q)
		b.press(t, "?")
		b.waitJS(t, `document.getElementById("help").open`, "")
		if text := eval[string](t, b, `document.getElementById("help").innerText`); !strings.Contains(text, "Search the board") || !strings.Contains(text, "Create an issue") {
			t.Errorf("the help lists %q", text)
		}
		b.press(t, kb.Escape)
		b.waitJS(t, `!document.getElementById("help").open`, "")
		b.press(t, "/") // from another page: the board, its search focused
		b.waitJS(t, `document.body.dataset.page === "board" && document.activeElement.id === "search"`, `document.activeElement.outerHTML`)
		b.press(t, "c", "j") // typed into the search field, not shortcuts
		if got := eval[string](t, b, `document.activeElement.id + " " + document.activeElement.value`); got != "search cj" {
			t.Errorf("keys typed in the search field: focus and value = %q, want search cj", got)
		}
		b.run(t, chromedp.Evaluate[chromedp.Void](`document.activeElement.value = ""; document.activeElement.blur()`))
		b.press(t, "j")
		first := eval[string](t, b, `document.activeElement.closest(".card")?.dataset.issue || ""`)
		b.press(t, "j")
		second := eval[string](t, b, `document.activeElement.closest(".card")?.dataset.issue || ""`)
		b.press(t, "k")
		back := eval[string](t, b, `document.activeElement.closest(".card")?.dataset.issue || ""`)
		if first == "" || second == "" || first == second || back != first {
			t.Errorf("j, j, k selected %q, %q, %q; want two different cards, then the first again", first, second, back)
		}
	})

	t.Run("KeyboardOnlyCreateCheckoutForceRelease", func(t *testing.T) {
		b.visit(t, s, "/"+q)
		b.press(t, "c")
		b.waitJS(t, `document.activeElement.id === "new-title"`, `document.activeElement.outerHTML`)
		b.run(t, chromedp.KeyEvent("made with keys"), chromedp.KeyEvent(kb.Enter))
		b.waitJS(t, `document.getElementById("confirm").open && document.activeElement.id === "confirm-ok"`, "")
		b.press(t, kb.Enter)
		card := `[...document.querySelectorAll(".card")].find(c => c.querySelector(".title").textContent === "made with keys")`
		b.waitJS(t, card+` !== undefined`, `document.querySelector(".columns").innerText`)
		ident := eval[string](t, b, card+`.dataset.issue`)
		b.press(t, kb.Escape) // leave the title field
		for i := 0; eval[string](t, b, `document.activeElement.closest(".card")?.dataset.issue || ""`) != ident; i++ {
			if i > 40 {
				t.Fatalf("j never selected the new card %s", ident)
			}
			b.press(t, "j")
		}
		b.press(t, kb.Enter)
		b.waitJS(t, `document.body.dataset.page === "issue" && document.getElementById("conn").dataset.state === "live"`, `document.body.innerText.slice(0, 300)`)
		b.tabTo(t, `#checkout select[name="agentId"]`)
		b.tabTo(t, `#checkout button[type="submit"]`)
		b.press(t, kb.Enter)
		b.waitJS(t, `document.getElementById("confirm").open && document.activeElement.id === "confirm-ok"`, "")
		b.press(t, kb.Enter)
		b.waitJS(t, `document.getElementById("issue-status").textContent.trim() === "in progress"`, `document.getElementById("issue-status").textContent`)
		b.tabTo(t, `#fr-reason`)
		b.run(t, chromedp.KeyEvent("done from the keyboard"), chromedp.KeyEvent(kb.Enter))
		b.waitJS(t, `document.getElementById("confirm").open && document.activeElement.id === "confirm-ok"`, "")
		b.press(t, kb.Enter)
		b.waitJS(t, `document.querySelector('tr[data-action="issue.admin_force_release"]') !== null && document.getElementById("issue-status").textContent.trim() === "todo"`, `document.getElementById("live").innerText.slice(-600)`)
	})

	if p := b.problems(); len(p) > 0 {
		t.Fatalf("the pages reported:\n%s", strings.Join(p, "\n"))
	}
}
