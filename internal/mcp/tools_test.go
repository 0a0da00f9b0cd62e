package mcp_test

import (
	"context"
	"encoding/json"
	"flag"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
	"github.com/clasp-dev/clasp/internal/mcp"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// TestToolListGolden pins the agent contract: names, descriptions,
// annotations and input and output schemas of every tool, the resources
// and the prompt. Run with -update to accept a change.
func TestToolListGolden(t *testing.T) {
	cs, _ := connect(t, mcp.Config{})
	ctx := context.Background()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	prompts, err := cs.ListPrompts(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(map[string]any{"tools": tools.Tools, "resources": res.Resources, "resourceTemplates": tmpl.ResourceTemplates, "prompts": prompts.Prompts}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := filepath.Join("testdata", "tools.golden.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestToolListGolden -update)", err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("tool list differs from %s (-want +got; -update accepts it):\n%s", golden, d)
	}
	names := []string{}
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.OutputSchema == nil || tl.Annotations == nil || tl.Annotations.DestructiveHint == nil || tl.Description == "" {
			t.Errorf("%s: output schema, annotations (with destructiveHint) and description are required", tl.Name)
		}
	}
	if d := cmp.Diff([]string{"add_comment", "checkout_issue", "claim_next_issue", "create_issue", "get_issue", "list_my_issues", "release_issue", "session_status", "update_issue_status"}, names); d != "" {
		t.Errorf("tools (-want +got):\n%s", d)
	}
	if cs.InitializeResult().Instructions != mcp.Instructions {
		t.Errorf("server instructions are not the work loop")
	}
}

// TestNotConfigured: without a key or URL the server still starts, and
// every tool answers isError naming the missing setting.
func TestNotConfigured(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     mcp.Config
		setting string
	}{
		{"no key", mcp.Config{URL: "http://127.0.0.1:1"}, "CLASP_API_KEY"},
		{"no url", mcp.Config{Token: "clasp_ak_x"}, "CLASP_URL"},
		{"board token", mcp.Config{URL: "http://127.0.0.1:1", Token: "clasp_bt_x"}, "CLASP_API_KEY"},
		{"unreadable key file", mcp.LoadConfig("http://127.0.0.1:1", "", "/nonexistent/key", "", 0, func(string) string { return "" }), "CLASP_API_KEY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, _ := connect(t, tc.cfg)
			for tool, args := range map[string]map[string]any{
				"session_status": nil, "list_my_issues": nil, "claim_next_issue": nil,
				"get_issue": {"issue": "ACME-1"}, "checkout_issue": {"issue": "ACME-1"}, "release_issue": {"issue": "ACME-1"},
				"add_comment": {"issue": "ACME-1", "body": "x"}, "update_issue_status": {"issue": "ACME-1", "status": "done"},
			} {
				r := call(t, cs, tool, args)
				if !r.IsError || r.str("outcome") != "not_configured" || r.str("error", "setting") != tc.setting || !strings.Contains(r.str("message"), tc.setting) {
					t.Errorf("%s: isError %v outcome %q setting %q message %q; want not_configured naming %s", tool, r.IsError, r.str("outcome"), r.str("error", "setting"), r.str("message"), tc.setting)
				}
			}
		})
	}
}

// TestNoNetworkBeforeFirstCall: initialize and listing tools make no
// connection to the clasp server; the first tool call does.
func TestNoNetworkBeforeFirstCall(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	cs, _ := connect(t, mcp.Config{URL: "http://" + ln.Addr().String(), Token: "clasp_ak_test"})
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ListPrompts(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("%d connection(s) to the clasp server before any tool call", n)
	}
	r := call(t, cs, "list_my_issues", nil)
	if !r.IsError || r.str("error", "code") != "unreachable" || r.str("error", "retryable") != "true" {
		t.Errorf("a server that drops connections: %+v; want isError unreachable, retryable", r.S)
	}
	if accepted.Load() == 0 {
		t.Errorf("the tool call made no connection")
	}
}

// TestWorkLoop drives every tool through one issue's life on both stores.
func TestWorkLoop(t *testing.T) {
	stores(t, func(t *testing.T, dbURL string) {
		w := newWorld(t, dbURL, 30*time.Second, 2)
		cs, _ := w.agentSession(0)
		ctx := context.Background()

		st := call(t, cs, "session_status", nil)
		if st.IsError || st.str("agent") != "coder" || st.str("runId") != "" || st.str("runOwner") != "session" {
			t.Fatalf("session_status before any run: %+v", st.S)
		}
		c := call(t, cs, "claim_next_issue", nil)
		if c.IsError || c.str("outcome") != "claimed" {
			t.Fatalf("claim: %+v", c.S)
		}
		ident, epoch, runID := c.str("issue", "identifier"), c.str("checkoutEpoch"), c.str("runId")
		if !strings.HasPrefix(ident, "ACME-") || epoch != "1" || c.str("stamp") != "Clasp-Issue: "+ident+"@1" || !strings.Contains(c.str("message"), "Clasp-Issue: "+ident+"@1") {
			t.Fatalf("claim answer: identifier %q epoch %q stamp %q message %q", ident, epoch, c.str("stamp"), c.str("message"))
		}
		run, err := w.board.RunGet(ctx, runID)
		if err != nil || run.InvocationSource != "mcp" || run.Status != clasp.RunRunning {
			t.Fatalf("the session's run: %+v %v; want running, invocationSource mcp", run, err)
		}

		again := call(t, cs, "checkout_issue", map[string]any{"issue": ident})
		if again.IsError || again.str("outcome") != "already_yours" || again.str("checkoutEpoch") != "1" {
			t.Errorf("checkout of an issue the session holds: %+v; want already_yours, epoch 1", again.S)
		}
		g := call(t, cs, "get_issue", map[string]any{"issue": ident})
		if g.IsError || g.str("issue", "heldBy", "thisSession") != "true" || g.str("issue", "heldBy", "agent") != "coder" {
			t.Errorf("get_issue: %+v", g.S)
		}
		for range 2 { // a retry of the same comment writes it once
			r := call(t, cs, "add_comment", map[string]any{"issue": ident, "body": "halfway there"})
			if r.IsError || r.str("outcome") != "commented" {
				t.Fatalf("add_comment: %+v", r.S)
			}
		}
		comments, err := w.board.CommentList(ctx, ident, client.CommentListParams{})
		if err != nil || len(comments) != 1 || comments[0].RunID == nil || *comments[0].RunID != runID {
			t.Fatalf("comments after two identical add_comment: %d, %v; want 1 in the session's run", len(comments), err)
		}
		l := call(t, cs, "list_my_issues", nil)
		if l.IsError || !strings.Contains(l.Text, `"heldByYou": true`) {
			t.Errorf("list_my_issues: %s", l.Text)
		}

		bad := call(t, cs, "update_issue_status", map[string]any{"issue": ident, "status": "blocked"})
		if !bad.IsError || bad.str("error", "code") != "invalid_request" || !strings.Contains(bad.str("message"), "comment") {
			t.Errorf("blocked without a comment: %+v", bad.S)
		}
		// A status outside the enum is refused by the input schema.
		if res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "update_issue_status", Arguments: map[string]any{"issue": ident, "status": "todo"}}); err != nil || !res.IsError {
			t.Errorf("status todo accepted: %v %+v", err, res)
		}
		for range 2 { // a retry writes once
			d := call(t, cs, "update_issue_status", map[string]any{"issue": ident, "status": "done", "comment": "result: 42"})
			if d.IsError || d.str("outcome") != "updated" || d.str("issue", "status") != "done" {
				t.Fatalf("done: %+v", d.S)
			}
		}
		comments, _ = w.board.CommentList(ctx, ident, client.CommentListParams{})
		if len(comments) != 2 || comments[1].Body != "result: 42" {
			t.Errorf("comments after done twice: %d; want 2 (the note and one result)", len(comments))
		}

		c2 := call(t, cs, "claim_next_issue", nil)
		if c2.IsError || c2.str("outcome") != "claimed" || c2.str("runId") != runID {
			t.Fatalf("second claim: %+v (same run expected)", c2.S)
		}
		rel := call(t, cs, "release_issue", map[string]any{"issue": c2.str("issue", "identifier")})
		if rel.IsError || rel.str("outcome") != "released" || rel.str("issue", "status") != "todo" {
			t.Fatalf("release: %+v", rel.S)
		}
		// The released issue comes back to a claim; then nothing is left.
		c3 := call(t, cs, "claim_next_issue", nil)
		if c3.str("outcome") != "claimed" || c3.str("checkoutEpoch") != "2" {
			t.Fatalf("claim after release: %+v; want claimed at epoch 2", c3.S)
		}
		call(t, cs, "update_issue_status", map[string]any{"issue": c3.str("issue", "identifier"), "status": "in_review", "comment": "please check"})
		none := call(t, cs, "claim_next_issue", nil)
		if none.IsError || none.str("outcome") != "none_available" || none.str("retryAfterSeconds") == "" {
			t.Fatalf("claim with nothing left: %+v; want none_available (not an error) with retryAfterSeconds", none.S)
		}
		wait := call(t, cs, "claim_next_issue", map[string]any{"waitSeconds": 99})
		if !wait.IsError || wait.str("error", "code") != "invalid_request" {
			t.Errorf("waitSeconds 99: %+v", wait.S)
		}
	})
}

// TestCreateIssueWithBlockers: create_issue splits work: a part with a
// parent and a blocker waits (get_issue says on what, claim_next_issue
// skips it), the same call again creates nothing new, a blocker that does
// not exist is an isError not_found; once the blocker is done the part is
// claimed.
func TestCreateIssueWithBlockers(t *testing.T) {
	stores(t, func(t *testing.T, dbURL string) {
		w := newWorld(t, dbURL, 30*time.Second, 0)
		cs, _ := w.agentSession(0)
		ctx := context.Background()
		first := call(t, cs, "create_issue", map[string]any{"title": "lay the foundation", "assignToMe": true})
		if first.IsError || first.str("outcome") != "created" || first.str("issue", "status") != "todo" || first.str("issue", "assignee") != "you" {
			t.Fatalf("create_issue: %+v", first.S)
		}
		base := first.str("issue", "identifier")
		args := map[string]any{"title": "build the walls", "parent": base, "blockedBy": []string{base}}
		part := call(t, cs, "create_issue", args)
		ident := part.str("issue", "identifier")
		if part.IsError || part.str("issue", "dependencyReady") != "false" || part.str("issue", "parent") != base ||
			!strings.Contains(part.str("message"), "waiting on "+base) {
			t.Fatalf("create_issue with a blocker: %+v", part.S)
		}
		if again := call(t, cs, "create_issue", args); again.str("issue", "identifier") != ident {
			t.Errorf("the same create_issue again made %s, want %s (created once)", again.str("issue", "identifier"), ident)
		}
		g := call(t, cs, "get_issue", map[string]any{"issue": ident})
		if g.IsError || !strings.Contains(g.str("message"), "waiting on "+base) || g.str("issue", "waitingOn") == "" {
			t.Errorf("get_issue of a waiting issue: %+v", g.S)
		}
		missing := call(t, cs, "create_issue", map[string]any{"title": "x", "blockedBy": []string{"ACME-999"}})
		if !missing.IsError || missing.str("error", "code") != "not_found" {
			t.Errorf("a blocker that does not exist: %+v", missing.S)
		}
		c := call(t, cs, "claim_next_issue", nil)
		if c.str("issue", "identifier") != base {
			t.Fatalf("claim: %+v; want %s (%s waits on it)", c.S, base, ident)
		}
		call(t, cs, "update_issue_status", map[string]any{"issue": base, "status": "done", "comment": "laid"})
		c = call(t, cs, "claim_next_issue", nil)
		if c.str("issue", "identifier") != ident {
			t.Fatalf("claim once the blocker is done: %+v; want %s", c.S, ident)
		}
		if iss, err := w.board.IssueGet(ctx, ident); err != nil || iss.ParentID == nil || len(iss.BlockedBy) != 1 {
			t.Errorf("the part as the board sees it: %+v, %v", iss, err)
		}
	})
}

// TestConflictAndOwnership: a second session's checkout of a held issue is
// an isError conflict naming the holder; a write after the lock moved is
// ownership_lost.
func TestConflictAndOwnership(t *testing.T) {
	stores(t, func(t *testing.T, dbURL string) {
		w := newWorld(t, dbURL, 30*time.Second, 1)
		a, _ := w.agentSession(0)
		b, _ := w.agentSession(0) // a second session of the same agent
		other, _ := w.agentSession(1)
		c := call(t, a, "claim_next_issue", nil)
		ident, runA := c.str("issue", "identifier"), c.str("runId")
		// Another agent is refused too (the claim assigned the issue), and
		// told who holds it.
		o := call(t, other, "checkout_issue", map[string]any{"issue": ident})
		if !o.IsError || o.str("outcome") != "conflict" || o.str("reason") != "assigned_to_other_agent" || o.str("heldBy", "runId") != runA {
			t.Errorf("another agent's checkout: %+v", o.S)
		}

		r := call(t, b, "checkout_issue", map[string]any{"issue": ident})
		if !r.IsError || r.str("outcome") != "conflict" || r.str("reason") != "held_by_live_run" ||
			r.str("heldBy", "agent") != "coder" || r.str("heldBy", "runId") != runA || r.str("heldBy", "live") != "true" || r.str("heldBy", "since") == "" {
			t.Fatalf("conflict: %+v", r.S)
		}
		if !strings.Contains(r.str("message"), ident+" is held by agent coder (live run") || !strings.Contains(r.str("message"), "claim_next_issue") {
			t.Errorf("conflict sentence: %q", r.str("message"))
		}
		if r.str("error", "code") != "checkout_conflict" || r.str("error", "status") != "409" {
			t.Errorf("conflict error: %+v", r.S["error"])
		}

		// The board takes the lock away and the other agent checks it out.
		if _, err := w.board.IssueForceRelease(context.Background(), ident, client.ForceReleaseRequest{Reason: "test"}); err != nil {
			t.Fatal(err)
		}
		if r := call(t, b, "checkout_issue", map[string]any{"issue": ident}); r.IsError {
			t.Fatalf("checkout after force release: %+v", r.S)
		}
		d := call(t, a, "update_issue_status", map[string]any{"issue": ident, "status": "done", "comment": "late"})
		if !d.IsError || d.str("outcome") != "ownership_lost" || !strings.Contains(d.str("message"), "Stop working on "+ident) {
			t.Fatalf("write by the old holder: %+v", d.S)
		}
	})
}

// TestRunLost: when the session's run ends under it, the next write is not
// redone: it answers run_lost naming the released issues, and the session
// works on in a new run.
func TestRunLost(t *testing.T) {
	stores(t, func(t *testing.T, dbURL string) {
		w := newWorld(t, dbURL, 30*time.Second, 1)
		a, _ := w.agentSession(0)
		c := call(t, a, "claim_next_issue", nil)
		ident, runA := c.str("issue", "identifier"), c.str("runId")
		if _, err := w.board.RunFinish(context.Background(), runA, client.RunFinishRequest{Status: clasp.RunCancelled}); err != nil {
			t.Fatal(err)
		}
		d := call(t, a, "update_issue_status", map[string]any{"issue": ident, "status": "done", "comment": "r"})
		if !d.IsError || d.str("outcome") != "run_lost" || d.str("error", "code") != "run_not_live" || !strings.Contains(d.Text, ident) {
			t.Fatalf("write after the run ended: %+v", d.S)
		}
		iss, err := w.board.IssueGet(context.Background(), ident)
		comments, _ := w.board.CommentList(context.Background(), ident, client.CommentListParams{})
		if err != nil || iss.Status == clasp.IssueDone || iss.CheckoutRunID != nil || len(comments) != 0 {
			t.Fatalf("issue after the lost write: %v, lock %v, %d comments, %v; want nothing written and no lock", iss.Status, iss.CheckoutRunID, len(comments), err)
		}
		again := call(t, a, "claim_next_issue", nil)
		if again.IsError || again.str("issue", "identifier") != ident || again.str("runId") == runA || again.str("runId") == "" {
			t.Fatalf("claim in the new run: %+v", again.S)
		}
	})
}

// TestIdleRelease: with no tool call for the idle release time the
// heartbeat stops, the lease runs out and the sweeper releases the issue;
// the next call reports run_lost.
func TestIdleRelease(t *testing.T) {
	w := newWorld(t, "", time.Second, 1)
	cs, _ := connect(t, mcp.Config{URL: w.url, Token: w.keys[0], IdleRelease: 300 * time.Millisecond})
	c := call(t, cs, "claim_next_issue", nil)
	runID := c.str("runId")
	eventually(t, "the idle session's run is swept", func() bool {
		r, err := w.board.RunGet(context.Background(), runID)
		return err == nil && r.Status == clasp.RunFailed
	})
	// Sweeper pass 1 fails the run; pass 2, a later transaction (RULES.md,
	// The sweeper), clears the dead run's locks, so the issue goes back to
	// the pool only then.
	var iss *clasp.Issue
	eventually(t, "the sweeper clears the swept run's locks", func() bool {
		var err error
		iss, err = w.board.IssueGet(context.Background(), c.str("issue", "identifier"))
		return err == nil && iss.CheckoutRunID == nil && iss.ExecutionRunID == nil
	})
	d := call(t, cs, "update_issue_status", map[string]any{"issue": iss.Identifier, "status": "done"})
	if d.str("outcome") != "run_lost" {
		t.Errorf("write after idle release: %+v", d.S)
	}
}

// TestHeartbeat: a session's run outlives several lease TTLs while the
// session is active (the heartbeat renews it every TTL/3). The TTL is 3 s,
// not less: a renewal delayed past the TTL by a loaded machine would let
// the sweeper end the run, which is the lease working, not a failure of
// the heartbeat.
func TestHeartbeat(t *testing.T) {
	const ttl = 3 * time.Second
	w := newWorld(t, "", ttl, 1)
	cs, _ := w.agentSession(0)
	c := call(t, cs, "claim_next_issue", nil)
	runID := c.str("runId")
	start, _ := w.board.RunGet(context.Background(), runID)
	eventually(t, "the lease is renewed past three TTLs", func() bool {
		r, err := w.board.RunGet(context.Background(), runID)
		return err == nil && r.LeaseExpiresAt.Sub(*start.LeaseExpiresAt) > 3*ttl
	})
	r, _ := w.board.RunGet(context.Background(), runID)
	if r.Status != clasp.RunRunning {
		t.Fatalf("run %s after heartbeats; want running", r.Status)
	}
}

// TestErrorSentences: 401, 404 and 400 answers are isError results with a
// sentence and the server's code.
func TestErrorSentences(t *testing.T) {
	w := newWorld(t, "", 30*time.Second, 1)
	cs, _ := w.agentSession(0)
	nf := call(t, cs, "get_issue", map[string]any{"issue": "ACME-999"})
	if !nf.IsError || nf.str("error", "code") != "not_found" || !strings.HasPrefix(nf.str("message"), `Issue "ACME-999" was not found (404)`) {
		t.Errorf("404: %+v", nf.S)
	}
	bad, _ := connect(t, mcp.Config{URL: w.url, Token: "clasp_ak_notakey"})
	u := call(t, bad, "list_my_issues", nil)
	if !u.IsError || u.str("error", "code") != "unauthenticated" || !strings.Contains(u.str("message"), "Do not retry") {
		t.Errorf("401: %+v", u.S)
	}
	empty := call(t, cs, "add_comment", map[string]any{"issue": "ACME-1", "body": " "})
	if !empty.IsError || empty.str("error", "code") != "invalid_request" {
		t.Errorf("empty comment: %+v", empty.S)
	}
	// A missing required argument is caught by the input schema.
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "get_issue", Arguments: map[string]any{}})
	if err != nil || !res.IsError {
		t.Errorf("get_issue without issue: %v %+v", err, res)
	}
}

// TestResourcesAndPrompt reads clasp://run, clasp://issues/{id} and the
// work_loop prompt; a missing issue, or a reference that cannot be one, is
// no resource.
func TestResourcesAndPrompt(t *testing.T) {
	w := newWorld(t, "", 30*time.Second, 1)
	cs, _ := w.agentSession(0)
	ctx := context.Background()
	c := call(t, cs, "claim_next_issue", nil)
	ident := c.str("issue", "identifier")
	rr, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "clasp://run"})
	if err != nil || !strings.Contains(rr.Contents[0].Text, c.str("runId")) || !strings.Contains(rr.Contents[0].Text, ident) {
		t.Fatalf("clasp://run: %v %+v", err, rr)
	}
	ri, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "clasp://issues/" + ident})
	if err != nil || !strings.Contains(ri.Contents[0].Text, `"identifier": "`+ident+`"`) {
		t.Fatalf("clasp://issues/%s: %v %+v", ident, err, ri)
	}
	if _, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "clasp://issues/ACME-404"}); err == nil {
		t.Errorf("a missing issue's resource answered")
	}
	if _, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "clasp://issues/not-an-issue"}); err == nil {
		t.Errorf("the resource of a reference that cannot be an issue answered")
	}
	p, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "work_loop"})
	if err != nil || p.Messages[0].Content.(*sdk.TextContent).Text != mcp.Instructions {
		t.Fatalf("work_loop: %v", err)
	}
}

// TestLauncherRun: with CLASP_RUN_ID (and the agent key) or a run token the
// tools act in the launcher's run, and closing the session leaves it live.
func TestLauncherRun(t *testing.T) {
	w := newWorld(t, "", 30*time.Second, 2)
	ctx := context.Background()
	agent := client.New(w.url, client.WithToken(w.keys[0]))
	for _, tc := range []struct {
		name string
		cfg  func(r *clasp.Run) mcp.Config
	}{
		{"run id", func(r *clasp.Run) mcp.Config { return mcp.Config{URL: w.url, Token: w.keys[0], RunID: r.ID} }},
		{"run token", func(r *clasp.Run) mcp.Config { return mcp.Config{URL: w.url, Token: r.RunToken} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run, err := agent.RunOpen(ctx, client.RunOpenRequest{InvocationSource: "launcher"})
			if err != nil {
				t.Fatal(err)
			}
			sess := mcp.NewSession(tc.cfg(run), mcp.Options{})
			srv := mcp.NewServer(sess)
			st, ct := sdk.NewInMemoryTransports()
			ss, err := srv.Connect(ctx, st, nil)
			if err != nil {
				t.Fatal(err)
			}
			cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, ct, nil)
			if err != nil {
				t.Fatal(err)
			}
			if s := call(t, cs, "session_status", nil); s.str("runOwner") != "launcher" {
				t.Errorf("session_status: %+v", s.S)
			}
			c := call(t, cs, "claim_next_issue", nil)
			if c.IsError || c.str("runId") != run.ID {
				t.Fatalf("claim in the launcher's run: %+v", c.S)
			}
			d := call(t, cs, "update_issue_status", map[string]any{"issue": c.str("issue", "identifier"), "status": "done", "comment": "ok"})
			if d.IsError {
				t.Fatalf("done: %+v", d.S)
			}
			_ = cs.Close()
			_ = ss.Wait()
			if err := sess.Close(clasp.RunSucceeded); err != nil {
				t.Fatal(err)
			}
			r, err := w.board.RunGet(ctx, run.ID)
			if err != nil || r.Status != clasp.RunRunning {
				t.Fatalf("launcher's run after the session closed: %v %v; want still running", r.Status, err)
			}
			runs, _ := w.board.RunList(ctx, w.co.ID, client.RunListParams{})
			for _, x := range runs.Items {
				if x.InvocationSource == mcp.InvocationSource {
					t.Errorf("a launcher session opened run %s of its own", x.ID)
				}
			}
		})
	}
}

// TestClaimWaits: claim_next_issue with waitSeconds takes an issue filed
// while it waits; a checkout of a done issue is a conflict saying so.
func TestClaimWaits(t *testing.T) {
	w := newWorld(t, "", 30*time.Second, 0)
	cs, _ := w.agentSession(0)
	got := make(chan result, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "claim_next_issue", Arguments: map[string]any{"waitSeconds": 60}})
		r := result{}
		if err == nil {
			r.IsError = res.IsError
			b, _ := json.Marshal(res.StructuredContent)
			_ = json.Unmarshal(b, &r.S)
		}
		got <- r
	}()
	// File the issue once the claim is waiting (its run exists).
	eventually(t, "the waiting claim opened its run", func() bool {
		p, err := w.board.RunList(context.Background(), w.co.ID, client.RunListParams{})
		return err == nil && len(p.Items) > 0
	})
	iss, err := w.board.IssueCreate(context.Background(), w.co.ID, client.IssueCreateRequest{Title: "late", Status: clasp.IssueTodo})
	if err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.IsError || r.str("outcome") != "claimed" || r.str("issue", "identifier") != iss.Identifier {
		t.Fatalf("waiting claim: %+v; want %s claimed", r.S, iss.Identifier)
	}
	call(t, cs, "update_issue_status", map[string]any{"issue": iss.Identifier, "status": "done"})
	c := call(t, cs, "checkout_issue", map[string]any{"issue": iss.Identifier})
	if !c.IsError || c.str("outcome") != "conflict" || c.str("reason") != "status_not_expected" || !strings.Contains(c.str("message"), "status is done") {
		t.Errorf("checkout of a done issue: %+v", c.S)
	}
}

// TestSentencesForOneAndMany: the sentences read right for one issue and
// for several, and for an argument that is not an identifier at all; the
// structured fields stay as they are.
func TestSentencesForOneAndMany(t *testing.T) {
	w := newWorld(t, "", 30*time.Second, 2)
	cs, _ := w.agentSession(0)
	first := call(t, cs, "claim_next_issue", nil)
	one := call(t, cs, "session_status", nil)
	want := "holding " + first.str("issue", "identifier") + ". Finish it with update_issue_status."
	if one.IsError || one.str("outcome") != "ok" || !strings.HasSuffix(one.str("message"), want) {
		t.Errorf("session_status holding one issue: message %q, want it to end %q (%+v)", one.str("message"), want, one.S)
	}
	second := call(t, cs, "claim_next_issue", nil)
	two := call(t, cs, "session_status", nil)
	want = "holding 2 issues: "
	if two.IsError || two.str("outcome") != "ok" || !strings.Contains(two.str("message"), want) ||
		!strings.HasSuffix(two.str("message"), ". Finish them with update_issue_status.") ||
		!strings.Contains(two.str("message"), first.str("issue", "identifier")) || !strings.Contains(two.str("message"), second.str("issue", "identifier")) {
		t.Errorf("session_status holding two issues: message %q, want %q and both identifiers (%+v)", two.str("message"), want, two.S)
	}

	nf := call(t, cs, "get_issue", map[string]any{"issue": "ACME-999"})
	want = `Issue "ACME-999" was not found (404): there is no such issue in this agent's company.`
	if !nf.IsError || nf.str("outcome") != "error" || nf.str("error", "code") != "not_found" || !strings.HasPrefix(nf.str("message"), want) {
		t.Errorf("get_issue of %q: %+v; want isError not_found, message starting %q", "ACME-999", nf.S, want)
	}
	bad := call(t, cs, "get_issue", map[string]any{"issue": "not an issue"})
	want = `"not an issue" is not an issue reference (400 invalid_request): give the issue's identifier (e.g. ACME-12) or UUID.`
	if !bad.IsError || bad.str("outcome") != "error" || bad.str("error", "code") != "invalid_request" || bad.str("error", "field") != "issue" || !strings.HasPrefix(bad.str("message"), want) {
		t.Errorf("get_issue of %q: %+v; want isError invalid_request naming issue, message starting %q", "not an issue", bad.S, want)
	}
}

// TestArgumentsOutsideTheSchema: arguments that do not fit a tool's input
// schema get the answer every refusal gets, isError with the tool's
// structured answer: outcome error, error.code invalid_request and
// error.field the argument.
func TestArgumentsOutsideTheSchema(t *testing.T) {
	w := newWorld(t, "", 30*time.Second, 1)
	cs, _ := w.agentSession(0)
	for _, tc := range []struct {
		tool  string
		args  map[string]any
		field string
	}{
		{"claim_next_issue", map[string]any{"waitSeconds": "x"}, "waitSeconds"},
		{"get_issue", map[string]any{}, "issue"},
		{"get_issue", map[string]any{"issue": "ACME-1", "extra": 1}, "extra"},
		{"update_issue_status", map[string]any{"issue": "ACME-1", "status": "todo"}, "status"},
	} {
		r := call(t, cs, tc.tool, tc.args)
		if !r.IsError || r.str("outcome") != "error" || r.str("error", "code") != "invalid_request" || r.str("error", "field") != tc.field ||
			!strings.Contains(r.str("message"), tc.field) || !strings.Contains(r.str("message"), "retrying as is fails again") {
			t.Errorf("%s %v: %+v (text %q); want isError, outcome error, invalid_request naming %q", tc.tool, tc.args, r.S, r.Text, tc.field)
		}
	}
	// Nothing was claimed by the refused call.
	if c := call(t, cs, "claim_next_issue", nil); c.IsError || c.str("outcome") != "claimed" {
		t.Errorf("claim after the refusals: %+v", c.S)
	}
}
