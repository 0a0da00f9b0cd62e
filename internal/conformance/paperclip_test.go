package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clasp-dev/clasp/internal/serveproc"
)

// The stores the conformance test runs on.
var backends = []string{"sqlite", "postgres"}

// startServer starts `clasp serve --local-trusted` (a request without
// Authorization is the board, as in the recorded Paperclip server's
// local_trusted mode) on a fresh store of backend and returns its root URL.
func startServer(t *testing.T, backend string) string {
	t.Helper()
	args := []string{"--local-trusted", "--data-dir", filepath.Join(t.TempDir(), "data")}
	if backend == "postgres" {
		admin := os.Getenv(serveproc.EnvTestPostgresURL)
		if admin == "" {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not set, and CI is: the PostgreSQL conformance run must not skip in CI", serveproc.EnvTestPostgresURL)
			}
			t.Skipf("%s is not set: no PostgreSQL to test against", serveproc.EnvTestPostgresURL)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		u, drop, err := serveproc.CreateDatabase(ctx, admin, "conformance")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := drop(context.Background()); err != nil {
				t.Errorf("drop database: %v", err)
			}
		})
		args = append(args, "--database-url", u)
	}
	var logs bytes.Buffer
	srv, err := serveproc.StartServer(t.Context(), serveproc.ServerConfig{Binary: claspBin, Args: args, Log: &syncWriter{w: &logs}})
	if err != nil {
		t.Fatalf("start clasp serve: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			t.Errorf("stop server: %v", err)
		}
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	return srv.URL()
}

// pc is a Paperclip-protocol client: Paperclip's paths and bodies,
// Authorization: Bearer <key>, the run in X-Paperclip-Run-Id, and
// Content-Type: application/json on every request (as the recorded client).
type pc struct {
	t    *testing.T
	base string
	hc   *http.Client
}

// ans is one answer: status, the JSON body as an object (obj) or array
// (arr), and the raw body.
type ans struct {
	status int
	obj    map[string]any
	arr    []any
	raw    string
	header http.Header
}

// do sends one request. token "" sends no Authorization (the board in
// local-trusted mode); run "" sends no run header. body is nil (none), a
// string (sent as is) or a value encoded as JSON.
func (c *pc) do(method, path, token, run string, body any) ans {
	c.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if run != "" {
		req.Header.Set("X-Paperclip-Run-Id", run)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	a := ans{status: res.StatusCode, raw: string(data), header: res.Header}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		if err := json.Unmarshal(trimmed, &a.arr); err != nil {
			c.t.Fatalf("%s %s: answer is not a JSON array: %v\n%s", method, path, err, data)
		}
	} else if err := json.Unmarshal(trimmed, &a.obj); err != nil {
		c.t.Fatalf("%s %s: answer is not a JSON object: %v\n%s", method, path, err, data)
	}
	return a
}

// must checks the status of step's answer and returns it; a wrong status
// ends the test (later steps depend on this one).
func (c *pc) must(step string, want int, a ans) ans {
	c.t.Helper()
	if a.status != want {
		c.t.Fatalf("step %s: status %d, want %d; body %s", step, a.status, want, a.raw)
	}
	return a
}

// get returns the value at a dotted path of an object ("details.checkoutRunId"),
// nil when absent.
func get(m map[string]any, path string) any {
	var v any = m
	for _, k := range strings.Split(path, ".") {
		o, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = o[k]
	}
	return v
}

// str returns get as a string ("" when absent or not a string).
func str(m map[string]any, path string) string {
	s, _ := get(m, path).(string)
	return s
}

// fields checks that the object at step has the given values at the given
// paths (nil: JSON null or absent).
func (c *pc) fields(step string, m map[string]any, want map[string]any) {
	c.t.Helper()
	for path, w := range want {
		got := get(m, path)
		if w == nil {
			if got != nil {
				c.t.Errorf("step %s: %s = %v, want null", step, path, got)
			}
			continue
		}
		if got != w {
			c.t.Errorf("step %s: %s = %#v, want %#v", step, path, got, w)
		}
	}
}

// errorCode checks a clasp error answer: status, code, and that the
// message contains each of msgParts.
func (c *pc) errorCode(step string, a ans, status int, code string, msgParts ...string) {
	c.t.Helper()
	if a.status != status || str(a.obj, "code") != code {
		c.t.Errorf("step %s: %d %s, want %d %s; body %s", step, a.status, str(a.obj, "code"), status, code, a.raw)
		return
	}
	msg := str(a.obj, "error")
	for _, p := range msgParts {
		if !strings.Contains(msg, p) {
			c.t.Errorf("step %s: error %q does not say %q", step, msg, p)
		}
	}
}

// TestPaperclipProtocol replays the agent side of Paperclip's recorded
// transcript (steps numbered as there) and the request shapes Paperclip's
// agents and setup tools send, against a real server on each store.
func TestPaperclipProtocol(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			c := &pc{t: t, base: startServer(t, backend) + "/api", hc: &http.Client{Timeout: time.Minute}}
			replay(t, c)
		})
	}
}

func replay(t *testing.T, c *pc) {
	const board = "" // local trusted: no Authorization is the board

	// Setup as Paperclip's tools do it: company without issuePrefix,
	// agents with adapterType/adapterConfig, keys {"name": ...}.
	co := c.must("setup company", 201, c.do("POST", "/companies", board, "", map[string]any{
		"name": "Peerless Engine", "description": nil, "budgetMonthlyCents": 0,
	})).obj
	cid := str(co, "id")
	if got := str(co, "issuePrefix"); got != "PEE" {
		t.Errorf("derived issuePrefix %q, want PEE (from the name)", got)
	}
	co2 := c.must("setup second company, same name", 201, c.do("POST", "/companies", board, "", map[string]any{"name": "Peerless Engine"})).obj
	if p := str(co2, "issuePrefix"); p == "PEE" || p == "" {
		t.Errorf("second company's derived issuePrefix %q: must differ from PEE", p)
	}
	agentBody := func(name string) map[string]any {
		return map[string]any{"name": name, "role": "general", "adapterType": "process", "adapterConfig": map[string]any{},
			"title": nil, "reportsTo": nil, "capabilities": nil, "budgetMonthlyCents": 0, "metadata": nil}
	}
	a1 := str(c.must("setup agent A1", 201, c.do("POST", "/companies/"+cid+"/agents", board, "", agentBody("Worker1"))).obj, "id")
	a2 := str(c.must("setup agent A2", 201, c.do("POST", "/companies/"+cid+"/agents", board, "", agentBody("Worker2"))).obj, "id")
	key := func(agent string) string {
		k := c.must("setup key", 201, c.do("POST", "/agents/"+agent+"/keys", board, "", map[string]any{"name": "bench", "scope": map[string]any{"kind": "standard"}})).obj
		if str(k, "name") != "bench" || !strings.HasPrefix(str(k, "token"), "clasp_ak_") {
			t.Errorf("key answer %v: want name bench and a token", k)
		}
		return str(k, "token")
	}
	k1, k2 := key(a1), key(a2)
	keys := c.must("key list", 200, c.do("GET", "/agents/"+a1+"/keys", board, "", nil)).arr
	if len(keys) != 1 || get(keys[0].(map[string]any), "name") != "bench" || get(keys[0].(map[string]any), "token") != nil {
		t.Errorf("key list %v: want one key named bench, without its token", keys)
	}
	openRun := func(token string) string {
		return str(c.must("open run", 201, c.do("POST", "/agents/me/runs", token, "", map[string]any{})).obj, "id")
	}
	r1, r2, rx, r3 := openRun(k1), openRun(k1), openRun(k1), openRun(k2)

	me := c.must("me", 200, c.do("GET", "/agents/me", k1, "", nil)).obj
	c.fields("me", me, map[string]any{"id": a1, "companyId": cid, "name": "Worker1"})

	// 0. Create the issue the way Paperclip clients do: its defaults with
	// every create.
	created := c.must("0", 201, c.do("POST", "/companies/"+cid+"/issues", board, "", map[string]any{
		"title": "Checkout demo", "description": "d", "status": "backlog", "assigneeAgentId": a1,
		"workMode": "standard", "priority": "medium", "requestDepth": 0, "allowDuplicate": false,
		"projectId": nil, "parentId": nil, "goalId": nil, "labelIds": []any{}, "billingCode": nil, "assigneeUserId": nil,
	})).obj
	i1, ident := str(created, "id"), str(created, "identifier")
	c.fields("0", created, map[string]any{"status": "backlog", "assigneeAgentId": a1, "checkoutRunId": nil, "executionRunId": nil, "priority": "medium"})
	if ident != "PEE-1" {
		t.Errorf("step 0: identifier %q, want PEE-1", ident)
	}
	// 0b. Deliberate difference: clasp never deduplicates by title.
	dup := c.must("0b", 201, c.do("POST", "/companies/"+cid+"/issues", board, "", map[string]any{"title": "  CHECKOUT DEMO ", "status": "backlog"})).obj
	if str(dup, "id") == i1 || get(dup, "deduplicated") != nil {
		t.Errorf("step 0b: %v, want a new issue (clasp does not deduplicate)", dup)
	}

	checkout := func(token, run, agent string, expected ...string) ans {
		return c.do("POST", "/issues/"+i1+"/checkout", token, run, map[string]any{"agentId": agent, "expectedStatuses": expected})
	}
	release := func(token, run string) ans { return c.do("POST", "/issues/"+i1+"/release", token, run, nil) }
	held := func(run string) map[string]any {
		return map[string]any{"status": "in_progress", "assigneeAgentId": a1, "checkoutRunId": run, "executionRunId": run}
	}
	lockDetails := func(run string) map[string]any {
		return map[string]any{"details.issueId": i1, "details.status": "in_progress", "details.assigneeAgentId": a1,
			"details.checkoutRunId": run, "details.executionRunId": run}
	}
	free := map[string]any{"status": "todo", "checkoutRunId": nil, "executionRunId": nil}

	// 1-4: checkout, conflict, same-run retry, another agent.
	c.fields("1", c.must("1", 200, checkout(k1, r1, a1, "backlog", "todo")).obj, held(r1))
	conflict := c.must("2", 409, checkout(k1, r2, a1, "backlog", "todo", "in_progress")).obj
	c.fields("2", conflict, lockDetails(r1))
	c.fields("3", c.must("3", 200, checkout(k1, r1, a1, "backlog", "todo")).obj, held(r1))
	c.fields("3b", c.must("3b", 200, checkout(k1, r1, a1, "todo", "in_progress")).obj, held(r1))
	c.fields("4", c.must("4", 409, checkout(k2, r3, a2, "todo", "in_progress")).obj, lockDetails(r1))
	// What the agent reads first in a heartbeat, and its inbox.
	hb := c.must("heartbeat-context", 200, c.do("GET", "/issues/"+i1+"/heartbeat-context", k1, r1, nil)).obj
	c.fields("heartbeat-context", hb, map[string]any{"issue.id": i1, "issue.identifier": ident, "issue.status": "in_progress",
		"issue.projectId": nil, "issue.parentId": nil, "run.id": r1, "allowedActions.checkout": true, "allowedActions.release": true,
		"allowedActions.update": true, "allowedActions.comment": true, "commentCursor.latestCommentId": nil, "wakeComment": nil})
	hb2 := c.must("heartbeat-context other run", 200, c.do("GET", "/issues/"+ident+"/heartbeat-context", k1, r2, nil)).obj
	c.fields("heartbeat-context other run", hb2, map[string]any{"run.id": r2, "allowedActions.checkout": false,
		"allowedActions.reason": "held_by_live_run", "allowedActions.update": false})
	inbox := c.must("inbox-lite", 200, c.do("GET", "/agents/me/inbox-lite", k1, "", nil)).arr
	if len(inbox) != 1 || get(inbox[0].(map[string]any), "id") != i1 || get(inbox[0].(map[string]any), "activeRun.id") != r1 {
		t.Errorf("inbox-lite %v: want the checked-out issue with its active run", inbox)
	}
	// 5-6: as another agent; no run header (the message names both headers).
	c.errorCode("5", checkout(k1, r1, a2, "todo"), 403, "agent_mismatch")
	c.errorCode("6", checkout(k1, "", a1, "todo", "in_progress"), 401, "run_id_required", "X-Clasp-Run-Id", "X-Paperclip-Run-Id")
	// 7-8: release by the wrong run, by another agent.
	c.errorCode("7", release(k1, r2), 409, "ownership_conflict")
	c.errorCode("8", release(k2, r3), 409, "ownership_conflict")
	// 9-10: release by the holder. Deliberate difference: the assignee stays.
	rel := c.must("9", 200, release(k1, r1)).obj
	c.fields("9", rel, free)
	c.fields("9 (assignee kept)", rel, map[string]any{"assigneeAgentId": a1})
	c.fields("10", c.must("10", 200, release(k1, r1)).obj, free)
	// 11-12.
	c.fields("11", c.must("11", 200, checkout(k1, r2, a1, "todo")).obj, held(r2))
	c.fields("12", c.must("12", 200, release(k1, r2)).obj, free)
	// 13-17: expectations and bad bodies. Deliberate differences: done is
	// 422 (Paperclip 409), malformed JSON 400 (Paperclip 500).
	c.errorCode("13", checkout(k1, r1, a1, "done"), 422, "precondition_failed")
	c.errorCode("14", checkout(k1, r1, a1, "open"), 400, "invalid_request")
	c.errorCode("15", checkout(k1, r1, a1), 400, "invalid_request")
	c.errorCode("16", c.do("POST", "/issues/"+i1+"/checkout", k1, r1, map[string]any{"expectedStatuses": []string{"todo"}}), 400, "invalid_request")
	c.errorCode("17", c.do("POST", "/issues/"+i1+"/checkout", k1, r1, `{"agentId": "x", `), 400, "invalid_request")
	// 18-20b: unknown ids, identifiers.
	c.errorCode("18", c.do("POST", "/issues/00000000-0000-4000-8000-000000000000/checkout", k1, r1, map[string]any{"agentId": a1, "expectedStatuses": []string{"todo"}}), 404, "not_found")
	c.errorCode("19", c.do("POST", "/issues/PEE-9999/checkout", k1, r1, map[string]any{"agentId": a1, "expectedStatuses": []string{"todo"}}), 404, "not_found")
	c.fields("20", c.must("20", 200, c.do("POST", "/issues/"+ident+"/checkout", k1, r1, map[string]any{"agentId": a1, "expectedStatuses": []string{"todo"}})).obj, held(r1))
	c.fields("20b", c.must("20b", 200, c.do("POST", "/issues/"+strings.ToLower(ident)+"/release", k1, r1, nil)).obj, free)
	// 21-24. Deliberate differences: 422/400/403 where Paperclip answers
	// 500, 500 and 200; messages name the header the request used.
	c.errorCode("21", checkout("pcp_0000bogus", r1, a1, "todo"), 401, "unauthenticated")
	c.errorCode("22", checkout(k1, "11111111-1111-4111-8111-111111111111", a1, "todo"), 422, "run_not_found", "X-Paperclip-Run-Id")
	c.errorCode("23", checkout(k1, "not-a-uuid", a1, "todo"), 400, "invalid_request", "X-Paperclip-Run-Id")
	c.errorCode("24", checkout(k1, r3, a1, "todo"), 403, "run_not_owned", "X-Paperclip-Run-Id")
	// 25-27: the holder's run ends; another live run of the agent takes it.
	c.fields("25", c.must("25", 200, checkout(k1, r1, a1, "todo")).obj, held(r1))
	c.must("25 finish", 200, c.do("POST", "/runs/"+r1+"/finish", k1, r1, map[string]any{"status": "failed"}))
	c.fields("26", c.must("26", 200, checkout(k1, rx, a1, "todo", "in_progress")).obj, held(rx))
	c.fields("27", c.must("27", 200, release(k1, rx)).obj, free)
	// 27b: deliberate difference: a terminal run cannot check out (409),
	// so the stuck state of 27d cannot arise.
	c.errorCode("27b", checkout(k1, r1, a1, "todo"), 409, "run_not_live", "X-Paperclip-Run-Id")
	// 28: the board checks out for A1 without a lock; a run header from the
	// board is refused (Paperclip ignores it).
	c.errorCode("28 header", c.do("POST", "/issues/"+i1+"/checkout", board, r2, map[string]any{"agentId": a1, "expectedStatuses": []string{"todo"}}), 400, "invalid_request", "X-Paperclip-Run-Id")
	c.fields("28", c.must("28", 200, c.do("POST", "/issues/"+i1+"/checkout", board, "", map[string]any{"agentId": a1, "expectedStatuses": []string{"todo"}})).obj,
		map[string]any{"status": "in_progress", "assigneeAgentId": a1, "checkoutRunId": nil, "executionRunId": nil})
	c.fields("28 adopt", c.must("28 adopt", 200, checkout(k1, rx, a1, "in_progress")).obj, held(rx))
	// 30: {"force": true} from a run: refused, clasp has no forced release by a run.
	c.errorCode("30", c.do("POST", "/issues/"+i1+"/release", k1, r2, map[string]any{"force": true}), 400, "invalid_request", "clasp has no forced release")
	c.errorCode("30 default", c.do("POST", "/issues/"+i1+"/release", k1, r2, map[string]any{"force": false}), 409, "ownership_conflict")
	// 31-33: the board's force-release (deliberate differences: clasp asks
	// for a reason, answers the issue itself and leaves it todo, never
	// in_progress without a lock), the agent's 403, board release.
	c.errorCode("31 no reason", c.do("POST", "/issues/"+i1+"/admin/force-release", board, "", nil), 400, "invalid_request", "reason")
	fr := c.must("31", 200, c.do("POST", "/issues/"+i1+"/admin/force-release", board, "", map[string]any{"reason": "conformance"})).obj
	c.fields("31", fr, map[string]any{"status": "todo", "assigneeAgentId": a1, "checkoutRunId": nil, "executionRunId": nil})
	c.errorCode("32", c.do("POST", "/issues/"+i1+"/admin/force-release", k1, rx, map[string]any{"reason": "x"}), 403, "forbidden")
	c.fields("33", c.must("33", 200, release(board, "")).obj, free)

	// 3.2: a run credential as the bearer (Paperclip's run JWT; clasp's run
	// token): the run header is optional; a different one is refused
	// (Paperclip: 422 agent_jwt_run_id_mismatch; clasp: 403).
	rt := c.must("3.2 open", 201, c.do("POST", "/agents/me/runs", k1, "", map[string]any{})).obj
	runToken, rrun := str(rt, "runToken"), str(rt, "id")
	c.fields("3.2 header", c.must("3.2 header", 200, checkout(runToken, rrun, a1, "todo")).obj, held(rrun))
	c.fields("3.2 no header", c.must("3.2 no header", 200, checkout(runToken, "", a1, "todo", "in_progress")).obj, held(rrun))
	c.errorCode("3.2 mismatch", checkout(runToken, "22222222-2222-4222-8222-222222222222", a1, "in_progress"), 403, "forbidden", "X-Paperclip-Run-Id")

	// Comments: Paperclip's optional fields, newest first by default,
	// order=asc, cursors both ways, after, one comment by id.
	var ids []string
	for i, body := range []string{"one", "two", "three"} {
		cm := c.must("comment "+body, 201, c.do("POST", "/issues/"+i1+"/comments", runToken, "", map[string]any{
			"body": body, "reopen": false, "interrupt": false, "authorType": "agent", "presentation": nil, "metadata": nil,
			"idempotencyKey": "comment-" + body,
		})).obj
		c.fields("comment "+body, cm, map[string]any{"issueId": i1, "body": body, "authorAgentId": a1, "runId": rrun})
		ids = append(ids, str(cm, "id"))
		if i == 0 { // the same idempotencyKey again answers the first comment
			again := c.must("comment replay", 201, c.do("POST", "/issues/"+i1+"/comments", runToken, "", map[string]any{
				"body": body, "reopen": false, "interrupt": false, "authorType": "agent", "presentation": nil, "metadata": nil,
				"idempotencyKey": "comment-" + body,
			}))
			if str(again.obj, "id") != ids[0] || again.header.Get("Idempotent-Replayed") != "true" {
				t.Errorf("comment replay: %s (Idempotent-Replayed %q), want comment %s again", again.raw, again.header.Get("Idempotent-Replayed"), ids[0])
			}
		}
	}
	c.errorCode("comment reopen", c.do("POST", "/issues/"+i1+"/comments", runToken, "", map[string]any{"body": "x", "reopen": true}), 400, "invalid_request", "clasp has no reopen flag")
	c.errorCode("comment authorType", c.do("POST", "/issues/"+i1+"/comments", runToken, "", map[string]any{"body": "x", "authorType": "user"}), 400, "invalid_request")
	c.errorCode("comment unknown", c.do("POST", "/issues/"+i1+"/comments", runToken, "", map[string]any{"body": "x", "frobnicate": 1}), 400, "invalid_request", "Unknown field")
	order := func(step, query string, want ...string) string {
		a := c.must(step, 200, c.do("GET", "/issues/"+i1+"/comments"+query, k1, "", nil))
		var got []string
		for _, v := range a.arr {
			got = append(got, str(v.(map[string]any), "id"))
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("step %s: comments %v, want %v", step, got, want)
		}
		return a.header.Get("Link")
	}
	order("comments default (newest first)", "", ids[2], ids[1], ids[0])
	order("comments asc", "?order=asc", ids...)
	order("comments after, asc", "?order=asc&after="+ids[0], ids[1], ids[2])
	order("comments desc page 2", "?limit=2&cursor="+ids[1], ids[0])
	order("comments asc page 2", "?order=asc&limit=2&cursor="+ids[1], ids[2])
	if link := order("comments desc page 1", "?limit=2", ids[2], ids[1]); !strings.Contains(link, "cursor="+ids[1]) {
		t.Errorf("comments page 1 Link %q: want a next page after %s", link, ids[1])
	}
	one := c.must("comment get", 200, c.do("GET", "/issues/"+i1+"/comments/"+ids[1], k2, "", nil)).obj
	c.fields("comment get", one, map[string]any{"id": ids[1], "body": "two", "issueId": i1})
	c.errorCode("comment get other issue", c.do("GET", "/issues/"+str(dup, "id")+"/comments/"+ids[1], k2, "", nil), 404, "not_found")
	hb = c.must("heartbeat-context comments", 200, c.do("GET", "/issues/"+i1+"/heartbeat-context?wakeCommentId="+ids[0], runToken, "", nil)).obj
	c.fields("heartbeat-context comments", hb, map[string]any{"commentCursor.latestCommentId": ids[2], "wakeComment.id": ids[0], "run.id": rrun})
	if cs, _ := get(hb, "comments").([]any); len(cs) != 3 || get(cs[0].(map[string]any), "id") != ids[2] {
		t.Errorf("heartbeat-context comments %v: want the three, newest first", get(hb, "comments"))
	}

	// PATCH with Paperclip's optional fields: description null clears it;
	// done with a comment in one step; unmodelled values refused.
	c.errorCode("patch reopen", c.do("PATCH", "/issues/"+i1, runToken, "", map[string]any{"reopen": true}), 400, "invalid_request", "clasp has no reopen flag")
	c.errorCode("patch project", c.do("PATCH", "/issues/"+i1, runToken, "", map[string]any{"projectId": "5b2c5d0e-8f43-4c3e-9a55-0d3c2b1e4f60"}), 400, "invalid_request", "clasp has no projects")
	c.errorCode("patch unknown", c.do("PATCH", "/issues/"+i1, runToken, "", map[string]any{"frobnicate": true}), 400, "invalid_request", "Unknown field")
	c.fields("patch defaults only", c.must("patch defaults only", 200, c.do("PATCH", "/issues/"+i1, runToken, "", map[string]any{"hiddenAt": nil, "interrupt": false})).obj,
		map[string]any{"id": i1, "description": "d"})
	c.fields("patch description null", c.must("patch description null", 200, c.do("PATCH", "/issues/"+i1, runToken, "", map[string]any{"description": nil})).obj,
		map[string]any{"description": ""})
	done := c.must("patch done", 200, c.do("PATCH", "/issues/"+i1, runToken, "", map[string]any{
		"status": "done", "comment": "finished", "reopen": false, "interrupt": false, "hiddenAt": nil, "projectId": nil, "labelIds": []any{},
	})).obj
	c.fields("patch done", done, map[string]any{"status": "done", "checkoutRunId": nil, "executionRunId": nil})
	if latest := c.must("comments after done", 200, c.do("GET", "/issues/"+i1+"/comments?limit=1", k1, "", nil)).arr; len(latest) != 1 || get(latest[0].(map[string]any), "body") != "finished" {
		t.Errorf("latest comment after PATCH done: %v, want the PATCH's comment first", latest)
	}

	// Issue create: the idempotencyKey body field acts as the header; a
	// non-default unmodelled field is refused naming the concept; truly
	// unknown fields stay refused.
	body := map[string]any{"title": "Idempotent", "workMode": "standard", "priority": "medium", "requestDepth": 0, "allowDuplicate": false, "idempotencyKey": "create-1"}
	first := c.must("create idempotencyKey", 201, c.do("POST", "/companies/"+cid+"/issues", k1, "", body))
	second := c.do("POST", "/companies/"+cid+"/issues", k1, "", body)
	if str(second.obj, "id") != str(first.obj, "id") || second.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("create repeated with idempotencyKey: %d %s, want issue %s replayed", second.status, second.raw, str(first.obj, "id"))
	}
	c.errorCode("create workMode", c.do("POST", "/companies/"+cid+"/issues", k1, "", map[string]any{"title": "x", "workMode": "planning"}), 400, "invalid_request", "clasp has no work modes")
	c.errorCode("create project", c.do("POST", "/companies/"+cid+"/issues", k1, "", map[string]any{"title": "x", "projectId": "5b2c5d0e-8f43-4c3e-9a55-0d3c2b1e4f60"}), 400, "invalid_request", "clasp has no projects")
	c.errorCode("create labels", c.do("POST", "/companies/"+cid+"/issues", k1, "", map[string]any{"title": "x", "labelIds": []string{"5b2c5d0e-8f43-4c3e-9a55-0d3c2b1e4f60"}}), 400, "invalid_request", "clasp has no labels")
	c.errorCode("create unknown", c.do("POST", "/companies/"+cid+"/issues", k1, "", map[string]any{"title": "x", "frobnicate": nil}), 400, "invalid_request", "Unknown field")

	// Agents read their colleagues, never keys or adapter settings.
	colleagues := c.must("agents list as agent", 200, c.do("GET", "/companies/"+cid+"/agents", k1, "", nil)).arr
	if len(colleagues) != 2 {
		t.Errorf("agents list as agent: %d agents, want 2", len(colleagues))
	}
	for _, v := range colleagues {
		if m := v.(map[string]any); get(m, "adapter") != nil || get(m, "adapterConfig") != nil {
			t.Errorf("agents list as agent shows adapter settings: %v", m)
		}
	}
	w2 := c.must("agent get as agent", 200, c.do("GET", "/agents/"+a2, k1, "", nil)).obj
	c.fields("agent get as agent", w2, map[string]any{"id": a2, "name": "Worker2", "companyId": cid, "adapter": nil})
	c.errorCode("agent keys as agent", c.do("GET", "/agents/"+a2+"/keys", k1, "", nil), 403, "forbidden")
	c.errorCode("other company's agents", c.do("GET", "/companies/"+str(co2, "id")+"/agents", k1, "", nil), 403, "forbidden")

	// Agent create with Paperclip's process adapter maps to clasp's.
	pa := c.must("agent process adapter", 201, c.do("POST", "/companies/"+cid+"/agents", board, "", map[string]any{
		"name": "Runner", "role": "general", "adapterType": "process",
		"adapterConfig": map[string]any{"command": "/bin/true", "args": []string{"-x"}, "cwd": "/tmp", "timeoutSec": 30, "graceSec": 15,
			"env": map[string]any{"FOO": "bar", "BAZ": map[string]any{"type": "plain", "value": "q"}}},
		"runtimeConfig":      map[string]any{"heartbeat": map[string]any{"enabled": true, "intervalSec": 0, "wakeOnDemand": true, "maxConcurrentRuns": 2}},
		"budgetMonthlyCents": 0, "permissions": map[string]any{}, "desiredSkills": []any{},
	})).obj
	c.fields("agent process adapter", pa, map[string]any{"adapter.type": "process", "adapter.command": "/bin/true", "adapter.cwd": "/tmp",
		"adapter.env.FOO": "bar", "adapter.env.BAZ": "q", "adapter.timeoutSec": float64(30), "adapter.heartbeat.enabled": true,
		"adapter.heartbeat.wakeOnAssignment": true, "adapter.heartbeat.maxConcurrentRuns": float64(2)})
	c.errorCode("agent other adapter", c.do("POST", "/companies/"+cid+"/agents", board, "", map[string]any{"name": "Claude", "adapterType": "claude_local", "adapterConfig": map[string]any{}}), 400, "invalid_request", "process")
	c.errorCode("agent secret env", c.do("POST", "/companies/"+cid+"/agents", board, "", map[string]any{"name": "Sec", "adapterType": "process",
		"adapterConfig": map[string]any{"command": "/bin/true", "env": map[string]any{"K": map[string]any{"type": "secret_ref", "secretId": "s"}}}}), 400, "invalid_request", "no secrets store")
	c.errorCode("agent budget", c.do("POST", "/companies/"+cid+"/agents", board, "", map[string]any{"name": "Rich", "adapterType": "process", "budgetMonthlyCents": 500}), 400, "invalid_request", "clasp has no budgets")
}

// syncWriter serializes writes to w (the server's log lines).
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
