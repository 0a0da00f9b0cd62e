package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// Version is the server version announced to MCP clients.
var Version = "dev"

// ServerName is the name announced to MCP clients.
const ServerName = "clasp"

// maxClaimWait bounds claim_next_issue's waitSeconds.
const maxClaimWait = 60

// retryAfterSeconds is the pause claim_next_issue suggests when nothing is
// available.
const retryAfterSeconds = 30

// NewServer returns an MCP server whose tools, resources and prompt act in
// sess. Instructions are the work_loop prompt's text.
func NewServer(sess *Session) *sdk.Server {
	srv := sdk.NewServer(&sdk.Implementation{Name: ServerName, Title: "clasp: take and finish work items", Version: Version},
		&sdk.ServerOptions{Instructions: Instructions, SchemaCache: schemaCache})
	ts := &toolSet{srv: srv, checks: map[string]func(json.RawMessage) *sdk.CallToolResult{}}
	addTools(ts, sess)
	addResources(srv, sess)
	srv.AddReceivingMiddleware(ts.checkArguments)
	return srv
}

// toolSet is a server being given its tools, and the check of each tool's
// arguments against its input schema.
type toolSet struct {
	srv *sdk.Server
	// checks answers a tools/call whose arguments do not fit the tool's
	// input schema (nil when they fit); written while the tools are added,
	// read-only once the server serves.
	checks map[string]func(args json.RawMessage) *sdk.CallToolResult
}

// checkArguments is the server's receiving middleware: a tools/call whose
// arguments do not fit the tool's input schema is answered as every other
// refusal is, an isError result with the tool's structured answer (outcome
// error, error.code invalid_request, error.field the argument), instead of
// the SDK's plain text, and reaches no handler.
func (ts *toolSet) checkArguments(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		if r, ok := req.(*sdk.CallToolRequest); ok && method == "tools/call" && r.Params != nil {
			if check := ts.checks[r.Params.Name]; check != nil {
				if res := check(r.Params.Arguments); res != nil {
					return res, nil
				}
			}
		}
		return next(ctx, method, req)
	}
}

// argumentError reports how args (a tool call's raw arguments) fail the
// input schema: the argument concerned ("" when the arguments as a whole
// are not an object) and a sentence; ok when they fit.
func argumentError(schema *jsonschema.Schema, resolved *jsonschema.Resolved, args json.RawMessage) (field, why string, ok bool) {
	var v any = map[string]any{}
	if len(args) > 0 && string(args) != "null" {
		if err := json.Unmarshal(args, &v); err != nil {
			return "", fmt.Sprintf("the arguments are not JSON (%v)", err), false
		}
	}
	err := resolved.Validate(v)
	if err == nil {
		return "", "", true
	}
	obj, isObj := v.(map[string]any)
	if !isObj {
		return "", "the arguments must be a JSON object", false
	}
	for _, name := range schema.Required {
		if _, ok := obj[name]; !ok {
			return name, fmt.Sprintf("argument %q is required", name), false
		}
	}
	names := make([]string, 0, len(obj))
	for name := range obj {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		ps := schema.Properties[name]
		if ps == nil {
			return name, fmt.Sprintf("there is no argument %q", name), false
		}
		pr, rerr := ps.Resolve(nil)
		if rerr != nil {
			continue
		}
		if perr := pr.Validate(obj[name]); perr != nil {
			return name, fmt.Sprintf("argument %q: %s", name, strings.TrimPrefix(perr.Error(), "validating root: ")), false
		}
	}
	return "", strings.TrimPrefix(err.Error(), "validating root: "), false
}

// schemaCache keeps the tools' schemas across servers: the HTTP endpoint
// builds a server per request.
var schemaCache = sdk.NewSchemaCache()

// statusSchema is update_issue_status's input schema: StatusIn's, with the
// status enum.
var statusSchema = sync.OnceValue(func() *jsonschema.Schema {
	st := inputSchema[StatusIn]()
	st.Properties["status"].Enum = []any{"in_review", "blocked", "done"}
	return st
})

// outPtr is a tool answer type: a pointer to a struct embedding Envelope.
type outPtr[T any] interface {
	*T
	env() *Envelope
}

// addTool registers a tool whose handler fills out and returns the
// failure, if any; a failure becomes an isError answer (Session.fail)
// whose structured content is out with its Envelope filled.
//
// Arguments that do not fit the input schema get the same kind of answer
// (ts.checks, toolSet.checkArguments): out with outcome error and error
// code invalid_request naming the argument.
func addTool[In any, T any, P outPtr[T]](ts *toolSet, sess *Session, t *sdk.Tool, ref func(In) string, h func(ctx context.Context, in In, out P) error) {
	schema, _ := t.InputSchema.(*jsonschema.Schema)
	if schema == nil {
		schema = inputSchema[In]()
	}
	// Resolved at the tool's first call: the HTTP endpoint builds a server
	// per request, which calls one tool.
	resolve := sync.OnceValues(func() (*jsonschema.Resolved, error) { return schema.Resolve(nil) })
	ts.checks[t.Name] = func(args json.RawMessage) *sdk.CallToolResult {
		resolved, err := resolve()
		if err != nil {
			return nil // the SDK's own check answers (the input types are static: not reached)
		}
		field, why, ok := argumentError(schema, resolved, args)
		if ok {
			return nil
		}
		out := P(new(T))
		env := out.env()
		env.Outcome = OutcomeError
		env.Message = fmt.Sprintf("The arguments of %s do not fit its input schema: %s. Fix the arguments; retrying as is fails again.", t.Name, why)
		env.Error = &ErrorInfo{Code: clasp.CodeInvalidRequest, Field: field}
		b, _ := json.MarshalIndent(out, "", "  ")
		return &sdk.CallToolResult{IsError: true, StructuredContent: out,
			Content: []sdk.Content{&sdk.TextContent{Text: env.Message + "\n\n" + string(b)}}}
	}
	sdk.AddTool(ts.srv, t, func(ctx context.Context, req *sdk.CallToolRequest, in In) (*sdk.CallToolResult, P, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(sess.calls, cancel)()
		sess.touch()
		out := P(new(T))
		err := h(ctx, in, out)
		res := &sdk.CallToolResult{}
		if err != nil {
			sess.fail(ctx, out.env(), ref(in), err)
			res.IsError = true
		}
		b, _ := json.MarshalIndent(out, "", "  ")
		res.Content = []sdk.Content{&sdk.TextContent{Text: out.env().Message + "\n\n" + string(b)}}
		return res, out, nil
	})
}

// Inputs.

// NoInput is the input of tools that take no argument.
type NoInput struct{}

// ClaimIn is claim_next_issue's input.
type ClaimIn struct {
	WaitSeconds int `json:"waitSeconds,omitempty" jsonschema:"optional: when nothing is available, keep trying for up to this many seconds (0-60) before answering none_available"`
}

// IssueIn names one issue.
type IssueIn struct {
	Issue string `json:"issue" jsonschema:"the issue's identifier (e.g. ACME-12) or UUID"`
}

// CommentIn is add_comment's input.
type CommentIn struct {
	Issue string `json:"issue" jsonschema:"the issue's identifier (e.g. ACME-12) or UUID"`
	Body  string `json:"body" jsonschema:"the comment text (markdown)"`
}

// StatusIn is update_issue_status's input.
type StatusIn struct {
	Issue   string `json:"issue" jsonschema:"the issue's identifier (e.g. ACME-12) or UUID"`
	Status  string `json:"status" jsonschema:"in_review (work finished, waiting for review), blocked (cannot go on: comment required) or done (finished)"`
	Comment string `json:"comment,omitempty" jsonschema:"result or reason, written in the same atomic write as the status (required for blocked)"`
}

// CreateIn is create_issue's input.
type CreateIn struct {
	Title       string   `json:"title" jsonschema:"a short title of the new issue"`
	Description string   `json:"description,omitempty" jsonschema:"what to do (markdown)"`
	Priority    string   `json:"priority,omitempty" jsonschema:"critical, high, medium (default) or low"`
	Parent      string   `json:"parent,omitempty" jsonschema:"identifier (e.g. ACME-12) of the issue the new one is a part of, usually the one you are splitting"`
	BlockedBy   []string `json:"blockedBy,omitempty" jsonschema:"identifiers of issues that must be done before the new one can be checked out"`
	AssignToMe  bool     `json:"assignToMe,omitempty" jsonschema:"assign the new issue to this agent (default: unassigned, for any agent to claim)"`
}

// ReleaseIn is release_issue's input.
type ReleaseIn struct {
	Issue    string `json:"issue" jsonschema:"the issue's identifier (e.g. ACME-12) or UUID"`
	Unassign bool   `json:"unassign,omitempty" jsonschema:"also clear the assignee, so any agent may take it"`
}

func noRef[In any](In) string        { return "" }
func issueRef(in IssueIn) string     { return in.Issue }
func commentRef(in CommentIn) string { return in.Issue }
func statusRef(in StatusIn) string   { return in.Issue }
func releaseRef(in ReleaseIn) string { return in.Issue }
func createRef(in CreateIn) string   { return in.Parent }
func inputSchema[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(err) // the input types are static
	}
	return s
}

func addTools(srv *toolSet, s *Session) {
	f := false
	addTool(srv, s, &sdk.Tool{
		Name:  "session_status",
		Title: "Session status",
		Description: "Shows this session's configuration, agent, run (its owner, lease and heartbeat) and the issues it holds. " +
			"Call it first, or whenever a tool answers not_configured or run_lost. Makes no change. Next: claim_next_issue.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: &f, OpenWorldHint: &f},
	}, noRef[NoInput], s.sessionStatus)

	addTool(srv, s, &sdk.Tool{
		Name:  "list_my_issues",
		Title: "List my issues",
		Description: "Lists the open issues assigned to this agent (todo, in_progress, blocked), most urgent first, and which of them this session holds. " +
			"Use it to see what is yours; to take work call claim_next_issue (or checkout_issue for a named issue).",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: &f, OpenWorldHint: &f},
	}, noRef[NoInput], s.listMyIssues)

	addTool(srv, s, &sdk.Tool{
		Name:  "claim_next_issue",
		Title: "Claim the next issue",
		Description: "Picks the most urgent todo issue this agent may take (whose blockers are all done) and checks it out for the session's run in one atomic call (no other agent gets it). " +
			"Answers outcome claimed with the issue, its checkoutEpoch and a stamp to put on your work (a commit trailer such as 'Clasp-Issue: ACME-12@7'); " +
			"or none_available with retryAfterSeconds (not an error: wait or stop). Optional waitSeconds keeps trying for up to 60 s. " +
			"Next: do the work described, add_comment as you go, then update_issue_status done (or in_review, or blocked with a reason).",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: false, IdempotentHint: false, DestructiveHint: &f, OpenWorldHint: &f},
	}, noRef[ClaimIn], s.claimNext)

	addTool(srv, s, &sdk.Tool{
		Name:  "get_issue",
		Title: "Get an issue",
		Description: "Shows one issue: title, description, status, assignee, who holds it (agent, run, since), its parent, blockers (blockedBy, waitingOn) and dependents, and its recent comments. " +
			"Makes no change. Use it before working on a named issue or after an error; next: checkout_issue to take it.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: &f, OpenWorldHint: &f},
	}, issueRef, s.getIssue)

	addTool(srv, s, &sdk.Tool{
		Name:  "checkout_issue",
		Title: "Check out a named issue",
		Description: "Takes a named issue (todo, in_progress whose holder died, blocked, in_review) for this session's run. Idempotent: an issue this session already holds answers already_yours with the same checkoutEpoch. " +
			"If another live run holds it the answer is an error (outcome conflict, heldBy says who): do not work on it, call claim_next_issue instead. " +
			"On success stamp your work with the answer's stamp, then update_issue_status when done.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: false, IdempotentHint: true, DestructiveHint: &f, OpenWorldHint: &f},
	}, issueRef, s.checkout)

	addTool(srv, s, &sdk.Tool{
		Name:  "add_comment",
		Title: "Comment on an issue",
		Description: "Adds a comment to an issue (progress notes, questions, findings). Safe to retry: the same comment sent again by this session is written once. " +
			"For the final result prefer update_issue_status with comment, which writes both in one atomic step.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: false, IdempotentHint: true, DestructiveHint: &f, OpenWorldHint: &f},
	}, commentRef, s.addComment)

	addTool(srv, s, &sdk.Tool{
		Name:  "update_issue_status",
		Title: "Finish or park an issue",
		Description: "Moves an issue this session holds to done (finished), in_review (finished, needs review) or blocked (cannot go on; comment required), with an optional comment written in the same atomic write, and lets go of it. " +
			"If another run holds the issue now the answer is an error (ownership_lost): stop working on it. Safe to retry. Next: claim_next_issue.",
		InputSchema: statusSchema(),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: false, IdempotentHint: true, DestructiveHint: &f, OpenWorldHint: &f},
	}, statusRef, s.updateStatus)

	addTool(srv, s, &sdk.Tool{
		Name:  "create_issue",
		Title: "Create an issue",
		Description: "Creates a todo issue in this agent's company, to split work into parts: parent names the issue it belongs to, blockedBy the issues that must be done first " +
			"(an issue with an unfinished blocker cannot be checked out or finished, and claim_next_issue skips it). Safe to retry: the same call repeated creates one issue. " +
			"Answers outcome created with the new issue and its identifier. An edge that would close a cycle is refused (error.code dependency_cycle).",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: false, IdempotentHint: true, DestructiveHint: &f, OpenWorldHint: &f},
	}, createRef, s.createIssue)

	addTool(srv, s, &sdk.Tool{
		Name:  "release_issue",
		Title: "Give an issue back",
		Description: "Gives back an issue this session holds without finishing it: it returns to todo (still assigned unless unassign) for another run to take. " +
			"Use it when you stop working on an issue you did not finish. Next: claim_next_issue, or end the session.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: false, IdempotentHint: true, DestructiveHint: &f, OpenWorldHint: &f},
	}, releaseRef, s.release)
}

// sessionStatus is session_status.
func (s *Session) sessionStatus(ctx context.Context, _ NoInput, out *StatusOut) error {
	out.Server = s.cfg.serverURL()
	out.IdleReleaseSec = int64(s.cfg.IdleRelease / time.Second)
	out.RunOwner = "session"
	switch {
	case s.opts.Stateless:
		out.RunOwner = "request"
	case s.cfg.LauncherRun():
		out.RunOwner = "launcher"
	}
	run, _, idle, held, _, lost := s.snapshot()
	out.Held = held
	out.Heartbeat = "none"
	if run != nil && !s.opts.Stateless {
		out.RunID = run.ID
		out.Heartbeat = "beating"
		if idle {
			out.Heartbeat = "idle"
		}
		if lost != nil {
			out.Heartbeat = "none"
			out.RunStatus = "ended"
		}
	} else if s.cfg.RunID != "" {
		out.RunID = s.cfg.RunID
	}
	if setting, sentence := s.cfg.Missing(); setting != "" {
		out.Missing = setting
		return &errNotConfigured{setting: setting, sentence: sentence}
	}
	out.Configured = true
	me, err := s.agent(ctx)
	if err != nil {
		return err
	}
	out.Agent, out.AgentID = me.Name, me.ID
	if out.RunID == "" && s.opts.Stateless && !s.cfg.RunToken() {
		// An agent API key with no X-Clasp-Run-Id: every tool that needs a
		// run would fail, so the status says so rather than "ok".
		return errNoRun
	}
	if out.RunID != "" {
		if r, err := s.base.RunGet(ctx, out.RunID); err == nil {
			out.RunStatus = string(r.Status)
			if r.LeaseExpiresAt != nil {
				out.LeaseExpiresAt = r.LeaseExpiresAt.UTC().Format(time.RFC3339)
			}
		}
	}
	out.Outcome = OutcomeOK
	switch {
	case out.RunID == "" && (s.opts.Stateless || s.cfg.RunToken()):
		out.Message = fmt.Sprintf("Connected as agent %s; the run is the one the credential names. Next: claim_next_issue.", me.Name)
	case out.RunID == "":
		out.Message = fmt.Sprintf("Connected to %s as agent %s; no run yet (the first claim opens one). Next: claim_next_issue.", s.cfg.serverURL(), me.Name)
	case len(held) == 1:
		out.Message = fmt.Sprintf("Connected as agent %s in run %s, holding %s. Finish it with update_issue_status.", me.Name, short(out.RunID), held[0])
	case len(held) > 1:
		out.Message = fmt.Sprintf("Connected as agent %s in run %s, holding %d issues: %s. Finish them with update_issue_status.", me.Name, short(out.RunID), len(held), strings.Join(held, ", "))
	default:
		out.Message = fmt.Sprintf("Connected as agent %s in run %s, holding no issue. Next: claim_next_issue.", me.Name, short(out.RunID))
	}
	return nil
}

// listMyIssues is list_my_issues.
func (s *Session) listMyIssues(ctx context.Context, _ NoInput, out *ListOut) error {
	c, err := s.client()
	if err != nil {
		return err
	}
	items, err := c.Inbox(ctx)
	if err != nil {
		return err
	}
	run, _, _, _, _, _ := s.snapshot()
	out.Issues = []IssueSummary{}
	for _, it := range items {
		sum := IssueSummary{Identifier: it.Identifier, ID: it.ID, Title: it.Title, Status: string(it.Status), Priority: string(it.Priority)}
		if it.ActiveRun != nil {
			if run != nil && it.ActiveRun.ID == run.ID {
				sum.HeldByYou = true
			} else {
				sum.HeldByOther = it.ActiveRun.ID
			}
		}
		out.Issues = append(out.Issues, sum)
	}
	out.Outcome = OutcomeOK
	if len(out.Issues) == 0 {
		out.Message = "No open issue is assigned to this agent. Call claim_next_issue to take unassigned work."
	} else {
		out.Message = fmt.Sprintf("%d open issue(s) assigned to this agent. Work on those heldByYou; take others with claim_next_issue or checkout_issue.", len(out.Issues))
	}
	return nil
}

// claimNext is claim_next_issue: one claim-next call, repeated about once a
// second for up to waitSeconds while nothing is available.
func (s *Session) claimNext(ctx context.Context, in ClaimIn, out *IssueOut) error {
	if in.WaitSeconds < 0 || in.WaitSeconds > maxClaimWait {
		return clasp.InvalidField("waitSeconds", "waitSeconds must be between 0 and %d.", maxClaimWait)
	}
	rc, runID, err := s.runClient(ctx)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(time.Duration(in.WaitSeconds) * time.Second)
	for {
		iss, err := rc.Claim(ctx, client.ClaimRequest{})
		if err != nil {
			if lost := s.runGone(ctx, runID, err); lost != nil {
				return lost
			}
			return err
		}
		if iss != nil {
			s.hold(iss)
			me, _ := s.agent(ctx)
			s.grant(out, iss, me, runID)
			out.Outcome = OutcomeClaimed
			out.Message = fmt.Sprintf("You hold %s (%s) now, checkout epoch %d. Do the work it describes, in a git worktree of your own on branch %s; stamp your commits with the trailer '%s'; then call update_issue_status with status done and the result as comment.",
				iss.Identifier, iss.Title, iss.CheckoutEpoch, out.Branch, out.Stamp)
			return nil
		}
		if time.Now().Add(time.Second).After(deadline) {
			break
		}
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	out.Outcome = OutcomeNoneAvailable
	out.RetryAfterSeconds = retryAfterSeconds
	out.Message = fmt.Sprintf("No issue is available to this agent right now. Call claim_next_issue again in about %d seconds (or with waitSeconds), or stop if your work is over.", retryAfterSeconds)
	return nil
}

// grant fills out for an issue this session's run holds.
func (s *Session) grant(out *IssueOut, iss *clasp.Issue, me *clasp.Agent, runID string) {
	if runID == "" && iss.CheckoutRunID != nil {
		runID = *iss.CheckoutRunID // a run token names its run: the lock says which
	}
	myID := ""
	var h *Holder
	if me != nil {
		myID = me.ID
		h = &Holder{Agent: me.NameKey, RunID: runID, Since: iss.ExecutionLockedAt, Live: true, ThisRun: true}
	}
	out.Issue = viewIssue(iss, myID, h)
	out.RunID, out.CheckoutEpoch, out.Stamp = runID, iss.CheckoutEpoch, stampOf(iss.Identifier, iss.CheckoutEpoch)
	out.Branch = clasp.WorkspaceOf(iss.Identifier, iss.CheckoutEpoch).Branch
	if iss.Workspace != nil {
		out.Branch = iss.Workspace.Branch // the company's branch template
	}
	s.bmu.Lock()
	if s.branches == nil {
		s.branches = map[string]string{}
	}
	s.branches[clasp.StampValue(iss.Identifier, iss.CheckoutEpoch)] = out.Branch
	s.bmu.Unlock()
}

// getIssue is get_issue.
func (s *Session) getIssue(ctx context.Context, in IssueIn, out *IssueOut) error {
	if strings.TrimSpace(in.Issue) == "" {
		return clasp.InvalidField("issue", "issue is required: an identifier such as ACME-12.")
	}
	c, err := s.client()
	if err != nil {
		return err
	}
	iss, err := c.IssueGet(ctx, in.Issue)
	if err != nil {
		return err
	}
	me, err := s.agent(ctx)
	if err != nil {
		return err
	}
	out.Issue = viewIssue(iss, me.ID, s.holder(ctx, iss))
	comments, err := c.CommentList(ctx, iss.ID, client.CommentListParams{Limit: 100})
	if err != nil {
		return err
	}
	if len(comments) > 5 {
		comments = comments[len(comments)-5:]
	}
	for _, cm := range comments {
		author := "board"
		if cm.AuthorAgentID != nil {
			author = *cm.AuthorAgentID
			if author == me.ID {
				author = "you"
			}
		}
		out.Issue.Comments = append(out.Issue.Comments, CommentView{ID: cm.ID, Author: author, Body: cm.Body, CreatedAt: cm.CreatedAt})
	}
	out.Outcome = OutcomeOK
	switch h := out.Issue.HeldBy; {
	case h != nil && h.ThisRun:
		out.RunID, out.CheckoutEpoch, out.Stamp = h.RunID, iss.CheckoutEpoch, stampOf(iss.Identifier, iss.CheckoutEpoch)
		out.Branch = clasp.WorkspaceOf(iss.Identifier, iss.CheckoutEpoch).Branch
		s.bmu.Lock()
		if b, ok := s.branches[clasp.StampValue(iss.Identifier, iss.CheckoutEpoch)]; ok {
			out.Branch = b // as granted, by the company's branch template
		}
		s.bmu.Unlock()
		out.Message = fmt.Sprintf("%s is %s and held by this session (epoch %d): go on with it.", iss.Identifier, iss.Status, iss.CheckoutEpoch)
	case h != nil:
		out.Message = fmt.Sprintf("%s is %s and held by agent %s (run %s): do not work on it.", iss.Identifier, iss.Status, h.Agent, short(h.RunID))
	case iss.Status.Closed():
		out.Message = fmt.Sprintf("%s is %s: nothing to do.", iss.Identifier, iss.Status)
	case len(out.Issue.WaitingOn) > 0:
		out.Message = fmt.Sprintf("%s is %s and waiting on %s: it cannot be checked out before they are done.", iss.Identifier, iss.Status, strings.Join(out.Issue.WaitingOn, ", "))
	default:
		out.Message = fmt.Sprintf("%s is %s and free: checkout_issue takes it.", iss.Identifier, iss.Status)
	}
	return nil
}

// createIssue is create_issue: a todo issue in the agent's company, with
// its parent and blockers, created once per identical call of the session
// (an Idempotency-Key derived from the arguments).
func (s *Session) createIssue(ctx context.Context, in CreateIn, out *IssueOut) error {
	if strings.TrimSpace(in.Title) == "" {
		return clasp.InvalidField("title", "title is required.")
	}
	pri := clasp.Priority(in.Priority)
	if in.Priority != "" && !pri.Valid() {
		return clasp.InvalidField("priority", "priority must be critical, high, medium or low.")
	}
	c, err := s.client()
	if err != nil {
		return err
	}
	me, err := s.agent(ctx)
	if err != nil {
		return err
	}
	req := client.IssueCreateRequest{Title: in.Title, Description: in.Description, Status: clasp.IssueTodo, Priority: pri,
		ParentID: in.Parent, BlockedByIssueIDs: in.BlockedBy}
	if in.AssignToMe {
		req.AssigneeAgentID = me.ID
	}
	key, _ := json.Marshal(in)
	iss, err := c.IssueCreate(client.WithIdempotencyKey(ctx, s.idemKey("create", string(key))), me.CompanyID, req)
	if err != nil {
		return err
	}
	out.Issue = viewIssue(iss, me.ID, nil)
	if iss.ParentID != nil {
		out.Issue.Parent = in.Parent
	}
	out.Outcome = OutcomeCreated
	if len(out.Issue.WaitingOn) > 0 {
		out.Message = fmt.Sprintf("Created %s (todo), waiting on %s: it can be taken once they are done.", iss.Identifier, strings.Join(out.Issue.WaitingOn, ", "))
	} else {
		out.Message = fmt.Sprintf("Created %s (todo): claim_next_issue or checkout_issue takes it.", iss.Identifier)
	}
	return nil
}

// holder describes who holds iss, nil when nobody does.
func (s *Session) holder(ctx context.Context, iss *clasp.Issue) *Holder {
	runID := ""
	switch {
	case iss.CheckoutRunID != nil:
		runID = *iss.CheckoutRunID
	case iss.ExecutionRunID != nil:
		runID = *iss.ExecutionRunID
	default:
		return nil
	}
	h := &Holder{RunID: runID, Since: iss.ExecutionLockedAt}
	if iss.ExecutionAgentNameKey != nil {
		h.Agent = *iss.ExecutionAgentNameKey
	}
	run, _, _, _, _, _ := s.snapshot()
	h.ThisRun = run != nil && run.ID == runID
	if h.ThisRun {
		h.Live = true
	} else if r, err := s.base.RunGet(ctx, runID); err == nil {
		h.Live = r.Live(time.Now())
	}
	return h
}

// checkout is checkout_issue: already_yours when this session's run holds
// the issue (no write), else one checkout call.
func (s *Session) checkout(ctx context.Context, in IssueIn, out *IssueOut) error {
	if strings.TrimSpace(in.Issue) == "" {
		return clasp.InvalidField("issue", "issue is required: an identifier such as ACME-12.")
	}
	rc, runID, err := s.runClient(ctx)
	if err != nil {
		return err
	}
	me, err := s.agent(ctx)
	if err != nil {
		return err
	}
	cur, err := rc.IssueGet(ctx, in.Issue)
	if err != nil {
		return err
	}
	if cur.CheckoutRunID != nil && *cur.CheckoutRunID == runID {
		s.hold(cur)
		s.grant(out, cur, me, runID)
		out.Outcome = OutcomeAlreadyYours
		out.Message = fmt.Sprintf("This session holds %s already (epoch %d, unchanged): go on with it; stamp your work '%s'.", cur.Identifier, cur.CheckoutEpoch, out.Stamp)
		return nil
	}
	iss, err := rc.IssueCheckout(ctx, cur.ID, client.CheckoutRequest{AgentID: me.ID,
		ExpectedStatuses: []clasp.IssueStatus{clasp.IssueTodo, clasp.IssueInProgress, clasp.IssueBlocked, clasp.IssueInReview}})
	if err != nil {
		if lost := s.runGone(ctx, runID, err); lost != nil {
			return lost
		}
		return fmt.Errorf("checkout %s: %w", cur.Identifier, err)
	}
	s.hold(iss)
	s.grant(out, iss, me, runID)
	out.Outcome = OutcomeCheckedOut
	out.Message = fmt.Sprintf("You hold %s (%s) now, checkout epoch %d. Work in a git worktree of your own on branch %s; stamp your commits with the trailer '%s'; call update_issue_status when done.", iss.Identifier, iss.Title, iss.CheckoutEpoch, out.Branch, out.Stamp)
	return nil
}

// addComment is add_comment, idempotent per (session, issue, body).
func (s *Session) addComment(ctx context.Context, in CommentIn, out *CommentOut) error {
	if strings.TrimSpace(in.Issue) == "" || strings.TrimSpace(in.Body) == "" {
		return clasp.InvalidField("body", "issue and body are required.")
	}
	c, err := s.client()
	if err != nil {
		return err
	}
	// Comment in the session's run when it has one (attribution); a
	// comment needs no run, so none is opened for it.
	rc, runID, err := s.runClientIfAny()
	if err != nil {
		return err
	}
	if rc != nil {
		c = rc
	}
	ictx := client.WithIdempotencyKey(ctx, s.idemKey("comment", in.Issue, in.Body))
	cm, err := c.CommentCreate(ictx, in.Issue, client.CommentCreateRequest{Body: in.Body})
	if err != nil {
		if lost := s.runGone(ctx, runID, err); lost != nil && runID != "" {
			return lost
		}
		return err
	}
	me, _ := s.agent(ctx)
	author := "you"
	if me == nil {
		author = ""
	}
	out.Issue = in.Issue
	out.Comment = &CommentView{ID: cm.ID, Author: author, Body: cm.Body, CreatedAt: cm.CreatedAt}
	out.Outcome = OutcomeCommented
	out.Message = fmt.Sprintf("Comment added to %s.", in.Issue)
	return nil
}

// runClientIfAny returns the run client when the session has a live run
// (it opens none), else nil; a run found lost is reported.
func (s *Session) runClientIfAny() (*client.Client, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost != nil && s.run != nil {
		return nil, "", &errRunLost{runID: s.run.ID, released: s.heldListLocked(), cause: s.lost}
	}
	if s.run == nil || s.rc == nil {
		if s.cfg.RunToken() && s.rc != nil {
			return s.rc, "", nil
		}
		return nil, "", nil
	}
	return s.rc, s.run.ID, nil
}

// updateStatus is update_issue_status: status and comment in one PATCH by
// the holding run, with an Idempotency-Key so a retry writes once.
func (s *Session) updateStatus(ctx context.Context, in StatusIn, out *IssueOut) error {
	st := clasp.IssueStatus(in.Status)
	switch st {
	case clasp.IssueDone, clasp.IssueInReview:
	case clasp.IssueBlocked:
		if strings.TrimSpace(in.Comment) == "" {
			return clasp.InvalidField("comment", "blocked needs a comment saying what blocks the issue and what would unblock it.")
		}
	default:
		return clasp.InvalidField("status", "status must be in_review, blocked or done (got %q).", in.Status)
	}
	if strings.TrimSpace(in.Issue) == "" {
		return clasp.InvalidField("issue", "issue is required: an identifier such as ACME-12.")
	}
	rc, runID, err := s.runClient(ctx)
	if err != nil {
		return err
	}
	req := client.IssueUpdateRequest{Status: &st}
	if in.Comment != "" {
		req.Comment = &in.Comment
	}
	ictx := client.WithIdempotencyKey(ctx, s.idemKey("status", runID, in.Issue, in.Status, in.Comment))
	iss, err := rc.IssueUpdate(ictx, in.Issue, req)
	if err != nil {
		if lost := s.runGone(ctx, runID, err); lost != nil {
			return lost
		}
		return err
	}
	s.drop(iss.ID)
	out.Issue = viewIssue(iss, s.agentID(ctx), nil)
	out.Outcome = OutcomeUpdated
	out.Message = fmt.Sprintf("%s is %s now and no longer held by this session. Next: claim_next_issue.", iss.Identifier, iss.Status)
	return nil
}

// agentID is the id of the agent the session's credential names, or ""
// when it cannot be read (the answer then names no holder as "you").
func (s *Session) agentID(ctx context.Context) string {
	if me, _ := s.agent(ctx); me != nil {
		return me.ID
	}
	return ""
}

// release is release_issue.
func (s *Session) release(ctx context.Context, in ReleaseIn, out *IssueOut) error {
	if strings.TrimSpace(in.Issue) == "" {
		return clasp.InvalidField("issue", "issue is required: an identifier such as ACME-12.")
	}
	rc, runID, err := s.runClient(ctx)
	if err != nil {
		return err
	}
	iss, err := rc.IssueRelease(ctx, in.Issue, client.ReleaseRequest{Unassign: in.Unassign})
	if err != nil {
		if lost := s.runGone(ctx, runID, err); lost != nil {
			return lost
		}
		return err
	}
	s.drop(iss.ID)
	out.Issue = viewIssue(iss, s.agentID(ctx), nil)
	out.Outcome = OutcomeReleased
	out.Message = fmt.Sprintf("%s is released (%s): this session no longer holds it. Next: claim_next_issue, or end the session.", iss.Identifier, iss.Status)
	return nil
}
