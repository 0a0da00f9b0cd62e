package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/clasp-dev/clasp"
)

// Endpoints of server-managed agents: adapter config, wakeups,
// run logs and run cancels.

// rawBody receives a response body as bytes instead of JSON.
type rawBody struct{ data []byte }

// AgentWithAdapter is an agent as the board sees it, with its adapter
// config (nil for none).
type AgentWithAdapter struct {
	clasp.Agent
	Adapter *clasp.AdapterConfig `json:"adapter"`
}

// AgentAdapter returns an agent with its adapter config (board). 404 not_found.
func (c *Client) AgentAdapter(ctx context.Context, agentID string) (*AgentWithAdapter, error) {
	var out AgentWithAdapter
	if _, err := c.do(ctx, request{method: http.MethodGet, path: pathf("/api/agents/%s", agentID)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AgentSetAdapter sets an agent's adapter config (board); cfg nil removes
// it. 400 invalid_request naming adapter.<field> for an unknown type or bad
// values; 422 precondition_failed for a terminated agent.
func (c *Client) AgentSetAdapter(ctx context.Context, agentID string, cfg *clasp.AdapterConfig) (*AgentWithAdapter, error) {
	var out AgentWithAdapter
	body := map[string]any{"adapter": cfg}
	if _, err := c.do(ctx, request{method: http.MethodPatch, path: pathf("/api/agents/%s", agentID), body: body}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// WakeRequest is the body of POST /api/agents/{id}/wakeup. Reason is
// on_demand (default), timer or assignment; IssueID (UUID or identifier) the
// issue to work; the same IdempotencyKey never makes two runs.
type WakeRequest struct {
	Reason         string `json:"reason,omitempty"`
	IssueID        string `json:"issueId,omitempty"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// Wake is what a wakeup did: Status queued (a new run), coalesced (an
// existing queued run), deferred (BlockedByRunID holds the issue; promoted
// when it ends) or skipped (paused agent, or no enabled adapter).
type Wake struct {
	WakeID         string     `json:"wakeId"`
	Status         string     `json:"status"`
	RunID          *string    `json:"runId"`
	Run            *clasp.Run `json:"run"`
	BlockedByRunID *string    `json:"blockedByRunId"`
	Replayed       bool       `json:"replayed"`
	// SkipReason (agent_paused, agent_terminated, no_adapter, not_workable)
	// and SkipMessage say why a skipped wake runs nothing.
	SkipReason  string `json:"skipReason,omitempty"`
	SkipMessage string `json:"skipMessage,omitempty"`
}

// AgentWake wakes a server-managed agent (the board, or the agent itself).
// Without req.IdempotencyKey the context's Idempotency-Key (see
// WithIdempotencyKey) is sent. 403 forbidden for another agent; 404 not_found.
func (c *Client) AgentWake(ctx context.Context, agentID string, req WakeRequest) (*Wake, error) {
	var out Wake
	if _, err := c.do(ctx, request{method: http.MethodPost, path: pathf("/api/agents/%s/wakeup", agentID), body: req, idempotent: req.IdempotencyKey == ""}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RunLogChunk is a piece of a run's log: Data from the requested offset,
// Size the whole log's size when answered (ask again from Size to follow),
// Status the run's status then.
type RunLogChunk struct {
	Data   []byte
	Size   int64
	Status clasp.RunStatus
}

// RunLog returns a server-managed run's captured output from byte offset
// (the board, or the run's agent). 404 not_found when the run has no log.
func (c *Client) RunLog(ctx context.Context, runID string, offset int64) (*RunLogChunk, error) {
	var raw rawBody
	q := url.Values{}
	if offset > 0 {
		q.Set("offset", strconv.FormatInt(offset, 10))
	}
	h, err := c.do(ctx, request{method: http.MethodGet, path: pathf("/api/runs/%s/log", runID), query: q}, &raw)
	if err != nil {
		return nil, err
	}
	out := &RunLogChunk{Data: raw.data, Status: clasp.RunStatus(h.Get("X-Clasp-Run-Status"))}
	out.Size, _ = strconv.ParseInt(h.Get("X-Clasp-Log-Size"), 10, 64)
	return out, nil
}

// RunCancel cancels a live run (board): a process the server runs gets
// SIGTERM, then SIGKILL, and the run ends cancelled (the answer may still
// say running until it is gone); any other live run is cancelled at once.
// 409 run_not_live if it already ended.
func (c *Client) RunCancel(ctx context.Context, runID string) (*clasp.Run, error) {
	var out clasp.Run
	if _, err := c.do(ctx, request{method: http.MethodPost, path: pathf("/api/runs/%s/cancel", runID), body: struct{}{}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
