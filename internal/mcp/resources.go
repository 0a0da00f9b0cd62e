package mcp

import (
	"context"
	"encoding/json"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Instructions is the work loop, sent as the server's instructions at
// initialization and as the text of the work_loop prompt.
const Instructions = `You take work from clasp, a shared backlog where exactly one session works an issue at a time. Ownership lasts as long as this session: if it ends or goes quiet for too long, what you hold goes back to the pool.

Work loop:
1. claim_next_issue: takes the most urgent issue you may work on, atomically. If the answer is none_available, wait retryAfterSeconds (or pass waitSeconds) or stop: there is nothing to do.
2. Do the work the issue describes. In a git repository, work in a worktree of your own on the answer's "branch" (named by your company's branch template; for example clasp/ACME-12: git worktree add .clasp-worktrees/ACME-12@7 clasp/ACME-12, or with -b clasp/ACME-12 when the branch is new), never in a worktree of an older epoch. Stamp every commit with the trailer from the answer's "stamp" field (git commit --trailer "Clasp-Issue: ACME-12@7"), so work of an older holder can be told apart: a repository with the clasp gate refuses a push of commits stamped with a superseded epoch.
3. add_comment for progress notes or questions worth keeping (optional).
4. update_issue_status with status done and the result as comment (one atomic write). Use in_review when a human must check it, or blocked with a comment saying what blocks it. If you stop without finishing, release_issue. To split a large issue, create_issue its parts (parent: this issue; blockedBy: parts that must come first) and make this issue wait for them.
5. Repeat from 1.

Errors are results with isError set and an outcome; read the message, it says what to do:
- conflict: another live run holds the issue (heldBy says who). Do not work on it; claim_next_issue instead.
- ownership_lost: this session no longer holds the issue. Stop working on it at once and write no result for it.
- run_lost: this session's run ended and everything it held was released. Nothing was written; claim again before working.
- blocked_by_unresolved (error.code): the issue waits for blockers that are not done; the message names them. Work on something else.
- not_configured: a setting is missing (named in error.setting); tell the human, retrying does not help.
Use human identifiers such as ACME-12 in what you write.`

// runURI and issueURITemplate are the resources of a session.
const (
	runURI           = "clasp://run"
	issueURITemplate = "clasp://issues/{id}"
)

func addResources(srv *sdk.Server, s *Session) {
	srv.AddResource(&sdk.Resource{
		URI:         runURI,
		Name:        "run",
		Title:       "This session's run",
		Description: "The session: agent, run (owner, status, lease, heartbeat) and held issues, as session_status answers it (JSON).",
		MIMEType:    "application/json",
	}, func(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		out := &StatusOut{}
		if err := s.sessionStatus(ctx, NoInput{}, out); err != nil {
			s.fail(ctx, &out.Envelope, "", err)
		}
		return jsonResource(req.Params.URI, out)
	})
	srv.AddResourceTemplate(&sdk.ResourceTemplate{
		URITemplate: issueURITemplate,
		Name:        "issue",
		Title:       "An issue",
		Description: "One issue by identifier (clasp://issues/ACME-12) or UUID: status, holder and recent comments, as get_issue answers it (JSON).",
		MIMEType:    "application/json",
	}, func(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		id, ok := strings.CutPrefix(req.Params.URI, "clasp://issues/")
		if !ok || id == "" || strings.Contains(id, "/") {
			return nil, sdk.ResourceNotFoundError(req.Params.URI)
		}
		out := &IssueOut{}
		if err := s.getIssue(ctx, IssueIn{Issue: id}, out); err != nil {
			s.fail(ctx, &out.Envelope, id, err)
			if out.Error != nil && (out.Error.Code == "not_found" || out.Error.Field == "issue") {
				return nil, sdk.ResourceNotFoundError(req.Params.URI)
			}
		}
		return jsonResource(req.Params.URI, out)
	})
	srv.AddPrompt(&sdk.Prompt{
		Name:        "work_loop",
		Title:       "Work the clasp backlog",
		Description: "Claim an issue, do it, comment, mark it done, repeat: the loop this server's tools are made for.",
	}, func(ctx context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
		return &sdk.GetPromptResult{
			Description: "The clasp work loop",
			Messages:    []*sdk.PromptMessage{{Role: "user", Content: &sdk.TextContent{Text: Instructions}}},
		}, nil
	})
}

func jsonResource(uri string, v any) (*sdk.ReadResourceResult, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}, nil
}
