package board_test

import (
	"encoding/json"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/clasp-dev/clasp/internal/board"
)

// fleet is a local-trusted board with company Acme (ACME) and one agent,
// builder, with an API key.
type fleet struct {
	t       *testing.T
	u       string
	company string
	agent   string
	key     string
}

func newFleet(t *testing.T) *fleet {
	t.Helper()
	u, _ := newBoard(t, board.Config{LocalTrusted: true})
	f := &fleet{t: t, u: u}
	var co, ag, key struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	}
	f.call("POST", "/api/companies", "", `{"name":"Acme","issuePrefix":"ACME"}`, http.StatusCreated, &co)
	f.company = co.ID
	f.call("POST", "/api/companies/"+f.company+"/agents", "", `{"name":"builder"}`, http.StatusCreated, &ag)
	f.agent = ag.ID
	f.call("POST", "/api/agents/"+f.agent+"/keys", "", `{}`, http.StatusCreated, &key)
	f.key = key.Token
	return f
}

// call sends one API request (as bearer when set, else as the local
// board) and decodes the answer into out.
func (f *fleet) call(method, path, bearer, body string, want int, out any) {
	f.t.Helper()
	hdr := map[string]string{"Content-Type": "application/json"}
	if bearer != "" {
		hdr["Authorization"] = "Bearer " + bearer
	}
	res, got := do(f.t, method, f.u+path, body, hdr)
	if res.StatusCode != want {
		f.t.Fatalf("%s %s: %d %s, want %d", method, path, res.StatusCode, got, want)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(got), out); err != nil {
			f.t.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

// issue creates an issue and returns its identifier.
func (f *fleet) issue(title, status, priority string) string {
	f.t.Helper()
	var iss struct {
		Identifier string `json:"identifier"`
	}
	f.call("POST", "/api/companies/"+f.company+"/issues", "", `{"title":"`+title+`","status":"`+status+`","priority":"`+priority+`"}`, http.StatusCreated, &iss)
	return iss.Identifier
}

// run opens a run of builder and returns its id and run token.
func (f *fleet) run() (string, string) {
	f.t.Helper()
	var r struct {
		ID       string `json:"id"`
		RunToken string `json:"runToken"`
	}
	f.call("POST", "/api/agents/me/runs", f.key, `{}`, http.StatusCreated, &r)
	return r.ID, r.RunToken
}

// checkout checks issue out in the run whose token is tok.
func (f *fleet) checkout(issue, tok string) {
	f.t.Helper()
	f.call("POST", "/api/issues/"+issue+"/checkout", tok, `{"agentId":"`+f.agent+`","expectedStatuses":["todo"]}`, http.StatusOK, nil)
}

func (f *fleet) page(path string) string {
	f.t.Helper()
	res, body := do(f.t, "GET", f.u+path, "", nil)
	if res.StatusCode != http.StatusOK {
		f.t.Fatalf("GET %s: %d\n%s", path, res.StatusCode, body)
	}
	return body
}

// cardOf returns the markup of issue's card on a board page.
func cardOf(t *testing.T, body, issue string) string {
	t.Helper()
	i := strings.Index(body, `<li class="card" data-issue="`+issue+`"`)
	if i < 0 {
		t.Fatalf("no card for %s on the board", issue)
	}
	card, _, _ := strings.Cut(body[i:], "</li>")
	return card
}

// TestAbandonedIssueIsMarked: an in_progress issue whose run finished
// (its lock released, the issue left in_progress) is marked abandoned,
// with the time its lock ended and the agent that held it, on its card,
// its page (with the action that hands it back) and the Locks page; an
// issue a live run holds is not.
func TestAbandonedIssueIsMarked(t *testing.T) {
	f := newFleet(t)
	left := f.issue("Left behind", "todo", "medium")
	held := f.issue("Being worked on", "todo", "medium")
	r1, tok1 := f.run()
	f.checkout(left, tok1)
	f.call("POST", "/api/runs/"+r1+"/finish", tok1, `{"status":"succeeded"}`, http.StatusOK, nil)
	_, tok2 := f.run()
	f.checkout(held, tok2)

	var iss struct {
		Status        string  `json:"status"`
		CheckoutRunID *string `json:"checkoutRunId"`
	}
	f.call("GET", "/api/issues/"+left, "", "", http.StatusOK, &iss)
	if iss.Status != "in_progress" || iss.CheckoutRunID != nil {
		t.Fatalf("%s after its run finished: %s, checkout run %v; want in_progress and unlocked", left, iss.Status, iss.CheckoutRunID)
	}

	board := f.page("/")
	if c := cardOf(t, board, left); !strings.Contains(visibleText(c), "abandoned: no live run since 20") || !strings.Contains(c, "last held by builder") {
		t.Errorf("card of %s, whose run finished, is not marked abandoned by builder:\n%s", left, c)
	}
	if c := cardOf(t, board, held); strings.Contains(c, "abandoned") {
		t.Errorf("card of %s, held by a live run, is marked abandoned:\n%s", held, c)
	}
	page := f.page("/issues/" + left)
	if !strings.Contains(visibleText(page), "abandoned: no live run since 20") || !strings.Contains(page, "last held by builder") || !strings.Contains(page, `id="abandoned-hint"`) || !strings.Contains(page, `id="force-release"`) {
		t.Errorf("page of %s does not say it is abandoned, by whom, and how to hand it back", left)
	}
	if page := f.page("/issues/" + held); strings.Contains(page, "abandoned") {
		t.Errorf("page of %s, held by a live run, says abandoned", held)
	}
	locks := f.page("/locks")
	_, ab, _ := strings.Cut(locks, `id="ab-h"`)
	ab, _, _ = strings.Cut(ab, "</section>")
	if !strings.Contains(ab, ">"+left+"</a>") || strings.Contains(ab, ">"+held+"</a>") || !strings.Contains(ab, "last held by builder") {
		t.Errorf("Locks page's abandoned section lists %s=%v (want true), %s=%v (want false):\n%s", left, strings.Contains(ab, left), held, strings.Contains(ab, held), ab)
	}
}

// TestRunsPageShowsHeldIssues: the Runs page lists, as a run's issue, the
// issues it holds (a run opened by an agent that checked one out was not
// woken for any issue).
func TestRunsPageShowsHeldIssues(t *testing.T) {
	f := newFleet(t)
	one, two := f.issue("One", "todo", "medium"), f.issue("Two", "todo", "medium")
	run, tok := f.run()
	f.checkout(one, tok)
	f.checkout(two, tok)
	idle, _ := f.run()
	body := f.page("/runs")
	rowOf := func(id string) string {
		i := strings.Index(body, `<tr data-run="`+id+`"`)
		if i < 0 {
			t.Fatalf("no row for run %s on the Runs page", id)
		}
		row, _, _ := strings.Cut(body[i:], "</tr>")
		return row
	}
	if row := rowOf(run); !strings.Contains(row, ">"+one+"</a>") || !strings.Contains(row, ">"+two+"</a>") {
		t.Errorf("row of the run holding %s and %s does not name them:\n%s", one, two, row)
	}
	if row := rowOf(idle); !strings.Contains(row, `class="run-issues">—</td>`) {
		t.Errorf("row of a run holding nothing names an issue:\n%s", row)
	}
}

// TestIssuePageSmallFixes: an issue without comments says so in a
// paragraph, not as a list item; a done issue offers no checkout and no
// force-release (they cannot apply), an open one offers both.
func TestIssuePageSmallFixes(t *testing.T) {
	f := newFleet(t)
	open := f.issue("Open", "todo", "medium")
	done := f.issue("Finished", "done", "medium")
	page := f.page("/issues/" + open)
	if strings.Contains(page, "<li>No comments.</li>") || !strings.Contains(page, `id="no-comments">No comments.`) {
		t.Errorf("an issue without comments: the empty state is not a paragraph:\n%s", page[strings.Index(page, `id="com-h"`):][:300])
	}
	if !strings.Contains(page, `id="checkout"`) || !strings.Contains(page, `id="force-release"`) {
		t.Errorf("a todo issue's page lacks checkout or force-release")
	}
	page = f.page("/issues/" + done)
	if strings.Contains(page, `id="checkout"`) || strings.Contains(page, `id="force-release"`) || !strings.Contains(page, `id="edit-issue"`) {
		t.Errorf("a done issue's page: checkout=%v force-release=%v edit=%v, want only the edit",
			strings.Contains(page, `id="checkout"`), strings.Contains(page, `id="force-release"`), strings.Contains(page, `id="edit-issue"`))
	}
}

// TestInProgressCardsByPriority: the In progress column lists its cards
// as claim-next picks work: most urgent first, then oldest.
func TestInProgressCardsByPriority(t *testing.T) {
	f := newFleet(t)
	var want []string
	highOld := f.issue("High, older", "todo", "high")
	low := f.issue("Low", "todo", "low")
	crit := f.issue("Critical", "todo", "critical")
	highNew := f.issue("High, newer", "todo", "high")
	want = []string{crit, highOld, highNew, low}
	_, tok := f.run()
	for _, iss := range []string{highOld, low, crit, highNew} {
		f.checkout(iss, tok)
	}
	body := f.page("/")
	_, col, _ := strings.Cut(body, `data-status="in_progress"`)
	col, _, _ = strings.Cut(col, "</section>")
	var got []string
	for _, part := range strings.Split(col, `<li class="card" data-issue="`)[1:] {
		ident, _, _ := strings.Cut(part, `"`)
		got = append(got, ident)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("In progress column = %v, want %v (priority, then age)", got, want)
	}
}

// idTail is what an id shown as its 8-character tail (or a whole UUID's
// first group) looks like in a page's text.
var idTail = regexp.MustCompile(`\b[0-9a-f]{8}\b`)

// visibleText returns the text of markup as a reader sees it at first:
// tags dropped, the content of closed <details> left out, entities decoded.
func visibleText(markup string) string {
	markup = regexp.MustCompile(`(?s)<details.*?</details>`).ReplaceAllString(markup, " ")
	markup = regexp.MustCompile(`(?s)<[^>]*>`).ReplaceAllString(markup, " ")
	return strings.Join(strings.Fields(html.UnescapeString(markup)), " ")
}

// between returns the markup of body from the first from to the next to.
func between(t *testing.T, body, from, to string) string {
	t.Helper()
	i := strings.Index(body, from)
	if i < 0 {
		t.Fatalf("no %q in the page", from)
	}
	part, _, _ := strings.Cut(body[i:], to)
	return part
}

// TestActivityReadsAsSentences: an issue's History, the Activity page and
// the Locks page name agents, issues and runs (each a link to its page),
// never by an id, and say what each row did in a sentence, with the row's
// raw details one click away.
func TestActivityReadsAsSentences(t *testing.T) {
	f := newFleet(t)
	ident := f.issue("Sentences", "todo", "high")
	run, tok := f.run()
	f.checkout(ident, tok)
	f.call("POST", "/api/issues/"+ident+"/release", tok, `{}`, http.StatusOK, nil)
	f.call("PATCH", "/api/issues/"+ident, "", `{"status":"in_review"}`, http.StatusOK, nil)
	f.checkout2(ident, tok)
	f.call("POST", "/api/issues/"+ident+"/admin/force-release", "", `{"reason":"stuck for the test"}`, http.StatusOK, nil)
	f.call("POST", "/api/issues/"+ident+"/comments", "", `{"body":"hello"}`, http.StatusCreated, nil)

	issueHref := `<a href="/issues/` + ident + `?company=` + f.company + `">` + ident + `</a>`
	agentHref := `<a href="/agents?company=` + f.company + `#ag-` + f.agent + `">builder</a>`
	runHref := `<a href="/runs/` + run + `?company=` + f.company + `">builder&#39;s run of `

	history := between(t, f.page("/issues/"+ident), `id="hist-h"`, "</section>")
	text := visibleText(history)
	if m := idTail.FindAllString(text, 3); len(m) > 0 {
		t.Errorf("the History shows ids %q:\n%s", m, text)
	}
	for _, want := range []string{
		"created " + ident + " “Sentences” in todo, priority high",
		"checked out " + ident + " at epoch 1 for builder in builder's run of ",
		"released " + ident,
		"changed status from todo to in review on " + ident,
		"force-released " + ident + " held by builder's run of ",
		", saying “stuck for the test”",
		"commented on " + ident,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the History does not say %q:\n%s", want, text)
		}
	}
	for _, want := range []string{issueHref, agentHref, runHref, `<details class="raw"><summary>issue.admin_force_release</summary>`, `&#34;reason&#34;: &#34;stuck for the test&#34;`} {
		if !strings.Contains(history, want) {
			t.Errorf("the History lacks %s:\n%s", want, history)
		}
	}

	for _, page := range []string{"/activity", "/locks"} {
		body := between(t, f.page(page+"?company="+f.company), `<main`, "</main>")
		text := visibleText(body)
		if m := idTail.FindAllString(text, 3); len(m) > 0 {
			t.Errorf("%s shows ids %q:\n%s", page, m, text)
		}
		if !strings.Contains(text, "force-released "+ident+" held by builder's run of ") || !strings.Contains(body, issueHref) || !strings.Contains(body, runHref) {
			t.Errorf("%s does not tell the force-release with links:\n%s", page, text)
		}
	}
	if body := f.page("/activity?company=" + f.company); !strings.Contains(body, agentHref) || !strings.Contains(visibleText(body), "the board created the agent builder") {
		t.Errorf("the Activity page does not name the agent builder, linked")
	}
}

// checkout2 checks issue out again, from whatever status it is in.
func (f *fleet) checkout2(issue, tok string) {
	f.t.Helper()
	f.call("POST", "/api/issues/"+issue+"/checkout", tok, `{"agentId":"`+f.agent+`","expectedStatuses":["todo","in_review"]}`, http.StatusOK, nil)
}

// TestRunPage: a run's page shows its status, its agent and the issues it
// holds and held (linked), its lease and last sign of life, and what it did
// as sentences; the Runs page, the issue page and the Locks page link to it.
func TestRunPage(t *testing.T) {
	f := newFleet(t)
	held, released := f.issue("Held", "todo", "medium"), f.issue("Released", "todo", "medium")
	run, tok := f.run()
	f.checkout(held, tok)
	f.checkout(released, tok)
	f.call("POST", "/api/issues/"+released+"/release", tok, `{}`, http.StatusOK, nil)
	href := `/runs/` + run + `?company=` + f.company
	page := f.page(href)
	text := visibleText(between(t, page, "<main", "</main>"))
	for _, want := range []string{"builder's run of ", "Agent builder", "Status running", "Holds " + held, "Held " + released,
		"Last sign of life 20", "checked out " + held + " at epoch 1 for builder", "released " + released, "No log here"} {
		if !strings.Contains(text, want) {
			t.Errorf("the run page does not say %q:\n%s", want, text)
		}
	}
	if m := idTail.FindAllString(text, 3); len(m) > 0 {
		t.Errorf("the run page shows ids %q:\n%s", m, text)
	}
	for _, want := range []string{`<a href="/issues/` + held + `?company=` + f.company + `">` + held + `</a>`, `<time datetime="`, `<span class="lease-left" data-expires="20`} {
		if !strings.Contains(page, want) {
			t.Errorf("the run page lacks %s", want)
		}
	}
	for _, p := range []string{"/runs", "/issues/" + held, "/locks"} {
		if body := f.page(p + "?company=" + f.company); !strings.Contains(body, `<a href="`+strings.ReplaceAll(href, "&", "&amp;")+`">`) && !strings.Contains(body, `<a href="`+href+`">`) {
			t.Errorf("%s does not link to the run's page %s", p, href)
		}
	}
	if res, _ := do(t, "GET", f.u+"/runs/01a23c3e-0000-7000-8000-000000000000?company="+f.company, "", nil); res.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown run's page answers %d, want 404", res.StatusCode)
	}
}

// TestDependenciesOnBoard: an issue's page names its parent, its blockers
// and dependents with their status and its sub-issues, each linked, and
// says what it waits for; its card on the board says "waiting on" the
// blockers that are not done, and stops saying it once they are; the
// History reads the edge changes as sentences.
func TestDependenciesOnBoard(t *testing.T) {
	f := newFleet(t)
	parent := f.issue("Release", "todo", "high")
	b1 := f.issue("Build", "todo", "medium")
	b2 := f.issue("Docs", "done", "medium")
	var iss struct {
		Identifier string `json:"identifier"`
	}
	f.call("POST", "/api/companies/"+f.company+"/issues", "",
		`{"title":"Ship","status":"todo","parentId":"`+parent+`","blockedByIssueIds":["`+b1+`","`+b2+`"]}`, http.StatusCreated, &iss)
	ship := iss.Identifier

	page := f.page("/issues/" + ship + "?company=" + f.company)
	deps := visibleText(between(t, page, `id="deps"`, `</section>`))
	for _, want := range []string{"Waiting on " + b1 + " : it cannot be checked out or finished before it is done.",
		"Parent " + parent + " todo", "Blocked by " + b1 + " todo , " + b2 + " done", "Blocks nothing", "Sub-issues none"} {
		if !strings.Contains(deps, want) {
			t.Errorf("the Dependencies section lacks %q:\n%s", want, deps)
		}
	}
	for _, link := range []string{parent, b1, b2} {
		if !strings.Contains(between(t, page, `id="deps"`, `</section>`), `href="/issues/`+link+`?company=`) {
			t.Errorf("%s is not linked in the Dependencies section", link)
		}
	}
	hist := visibleText(between(t, page, `id="hist-h"`, `</section>`))
	for _, want := range []string{"made " + ship + " wait for " + b1, "made " + ship + " a sub-issue of " + parent} {
		if !strings.Contains(hist, want) {
			t.Errorf("the History lacks %q:\n%s", want, hist)
		}
	}
	parentPage := visibleText(between(t, f.page("/issues/"+parent+"?company="+f.company), `id="deps"`, `</section>`))
	if !strings.Contains(parentPage, "Sub-issues "+ship+" todo") {
		t.Errorf("the parent's page does not list its sub-issue:\n%s", parentPage)
	}
	if !strings.Contains(visibleText(cardOf(t, f.page("/?company="+f.company), ship)), "waiting on "+b1) {
		t.Errorf("the card of %s does not say it waits on %s", ship, b1)
	}

	f.call("PATCH", "/api/issues/"+b1, "", `{"status":"done"}`, http.StatusOK, nil)
	if card := visibleText(cardOf(t, f.page("/?company="+f.company), ship)); strings.Contains(card, "waiting") {
		t.Errorf("the card of %s still waits once its blockers are done: %s", ship, card)
	}
	if deps := visibleText(between(t, f.page("/issues/"+ship+"?company="+f.company), `id="deps"`, `</section>`)); !strings.Contains(deps, "Ready: every blocker is done.") {
		t.Errorf("the Dependencies section of a ready issue:\n%s", deps)
	}
}

// An archived company leaves the picker and is not the default page; its
// own link still opens it, marked archived; restored, it is back.
func TestArchivedCompanyLeavesThePicker(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	var beta struct {
		ID string `json:"id"`
	}
	f.call("POST", "/api/companies", "", `{"name":"Beta Labs","issuePrefix":"BETA"}`, http.StatusCreated, &beta)
	picker := func(body string) string { return between(t, body, `<select id="company-pick"`, `</select>`) }
	if p := picker(f.page("/")); !strings.Contains(p, "Acme (ACME)") || !strings.Contains(p, "Beta Labs (BETA)") {
		t.Fatalf("picker before archiving:\n%s", p)
	}
	f.call("POST", "/api/companies/"+f.company+"/archive", "", ``, http.StatusOK, nil)
	home := f.page("/")
	if p := picker(home); strings.Contains(p, "ACME") || !strings.Contains(p, "Beta Labs (BETA)") {
		t.Errorf("picker with Acme archived lists it, or lacks Beta:\n%s", p)
	}
	if strings.Contains(home, `data-company="`+f.company+`"`) {
		t.Errorf("the default page opens the archived company")
	}
	own := f.page("/?company=" + f.company)
	if p := picker(own); !strings.Contains(p, "Acme (ACME), archived") {
		t.Errorf("picker on the archived company's own page does not mark it:\n%s", p)
	}
	if !strings.Contains(own, `<span class="badge" title="Left out of the company picker`) {
		t.Errorf("the archived company's page has no archived badge")
	}
	f.call("POST", "/api/companies/"+f.company+"/unarchive", "", ``, http.StatusOK, nil)
	if p := picker(f.page("/")); !strings.Contains(p, "Acme (ACME)</option>") {
		t.Errorf("picker after restoring lacks Acme:\n%s", p)
	}
}

// TestAttentionAndWebhooksPages: an issue whose runs failed three times
// in a row is listed first on "Needs attention" as escalated, with its
// failures, before an abandoned one; the Webhooks page lists each
// subscription with its deliveries and their status (RULES.md E5, W4).
func TestAttentionAndWebhooksPages(t *testing.T) {
	f := newFleet(t)
	var hook struct {
		ID string `json:"id"`
	}
	f.call("POST", "/api/companies/"+f.company+"/webhooks", "", `{"url":"https://hooks.example.com/clasp","events":["issue.escalated"]}`, http.StatusCreated, &hook)
	left := f.issue("Left behind", "todo", "medium")
	r0, tok0 := f.run()
	f.checkout(left, tok0)
	f.call("POST", "/api/runs/"+r0+"/finish", tok0, `{"status":"succeeded"}`, http.StatusOK, nil)
	crash := f.issue("Always crashes", "todo", "high")
	var runs []string
	for range 3 {
		var r struct {
			ID       string `json:"id"`
			RunToken string `json:"runToken"`
		}
		f.call("POST", "/api/agents/me/runs", f.key, `{"issueId":"`+crash+`"}`, http.StatusCreated, &r)
		f.call("POST", "/api/issues/"+crash+"/checkout", r.RunToken, `{"agentId":"`+f.agent+`","expectedStatuses":["todo","in_progress"]}`, http.StatusOK, nil)
		f.call("POST", "/api/runs/"+r.ID+"/finish", r.RunToken, `{"status":"failed","error":"segfault"}`, http.StatusOK, nil)
		runs = append(runs, r.ID)
	}
	page := f.page("/attention")
	esc := strings.Index(page, `data-issue="`+crash+`"`)
	ab := strings.Index(page, `data-issue="`+left+`"`)
	if esc < 0 || ab < 0 || esc > ab {
		t.Fatalf("Needs attention lists %s at %d and %s at %d; want the escalated one first:\n%s", crash, esc, left, ab, page)
	}
	item, _, _ := strings.Cut(page[esc:], "</li>")
	if !strings.Contains(item, "escalated") || !strings.Contains(item, "3 failed runs in a row") || !strings.Contains(item, runs[2]) || !strings.Contains(item, "segfault") {
		t.Errorf("the escalated item does not say what failed:\n%s", item)
	}
	hooks := f.page("/webhooks")
	if !strings.Contains(hooks, "https://hooks.example.com/clasp") || !strings.Contains(hooks, `data-status="pending"`) ||
		!strings.Contains(hooks, "issue.escalated") || !strings.Contains(hooks, `id="create-webhook"`) || !strings.Contains(hooks, "/redeliver") {
		t.Errorf("the Webhooks page does not list the subscription, its pending delivery and the actions:\n%s", hooks)
	}
	if strings.Contains(hooks, "failing since") {
		t.Errorf("a subscription with no delivery given up is flagged failing")
	}
}
