package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// This file has the endpoints of server-managed agents: the
// adapter config (in PATCH /api/agents/{id}, agents.go), wakeups, run logs
// and run cancels.

// errNoHeartbeat is the answer of heartbeat endpoints over a store without
// store.HeartbeatStore (both real stores have it).
func errNoHeartbeat() error {
	return clasp.Errorf(clasp.CodeInternal, "This server's store does not support server-managed agents.")
}

// decodeAdapter decodes the "adapter" of PATCH /api/agents/{id} with the
// strict rules of request bodies and normalizes it (clasp.AdapterConfig.Normalize).
// JSON null gives nil (remove the adapter). 400 invalid_request with
// details.field "adapter.<field>".
func decodeAdapter(raw json.RawMessage) (*clasp.AdapterConfig, error) {
	if string(raw) == "null" {
		return nil, nil
	}
	var c clasp.AdapterConfig
	if err := decodeJSONBytes(raw, &c); err != nil {
		if clasp.ErrorCode(err) == clasp.CodeInvalidRequest {
			var ce *clasp.Error
			if errors.As(err, &ce) && ce.Details["field"] == nil {
				return nil, clasp.InvalidField("adapter", "Field \"adapter\" must be an adapter config object or null: %s", ce.Message)
			}
		}
		return nil, prefixField(err, "adapter")
	}
	if err := c.Normalize(); err != nil {
		return nil, prefixField(err, "adapter")
	}
	return &c, nil
}

// prefixField renames details.field of a 400 invalid_request to
// "<prefix>.<field>" (a field inside an object of the body); other errors
// are returned as they are.
func prefixField(err error, prefix string) error {
	var ce *clasp.Error
	if !errors.As(err, &ce) || ce.Code != clasp.CodeInvalidRequest {
		return err
	}
	f, _ := ce.Details["field"].(string)
	if f == "" || f == prefix {
		return err
	}
	out := *ce
	out.Details = map[string]any{}
	for k, v := range ce.Details {
		out.Details[k] = v
	}
	out.Details["field"] = prefix + "." + f
	return &out
}

// agentOut is an agent as the board sees it: with its adapter config.
type agentOut struct {
	*clasp.Agent
	Adapter *clasp.AdapterConfig `json:"adapter"`
}

// agentAnswer answers 200 with a and its adapter config (null for none).
func (s *Server) agentAnswer(ctx context.Context, a *clasp.Agent) (int, any, error) {
	out := &agentOut{Agent: a}
	if hst, ok := s.st.(store.HeartbeatStore); ok {
		c, err := hst.AgentAdapterGet(ctx, a.ID)
		if err != nil {
			return 0, nil, err
		}
		out.Adapter = c
	}
	return http.StatusOK, out, nil
}

// agentWakeupIn is the body of POST /api/agents/{id}/wakeup.
type agentWakeupIn struct {
	Reason         *string `json:"reason"`
	IssueID        *string `json:"issueId"`
	IdempotencyKey *string `json:"idempotencyKey"`
}

func (in *agentWakeupIn) validate() error {
	if in.Reason != nil {
		switch *in.Reason {
		case clasp.InvocationTimer, clasp.InvocationAssignment, clasp.InvocationOnDemand:
		default:
			return clasp.InvalidField("reason", "Field \"reason\" must be one of on_demand (the default), timer, assignment; not %q.", truncate(*in.Reason, 64))
		}
	}
	if in.IssueID != nil && !validIssueRef(*in.IssueID) {
		return clasp.InvalidField("issueId", "Field \"issueId\" must be an issue's UUID or its identifier (PREFIX-N, such as ENG-12), not %q.", truncate(*in.IssueID, 64))
	}
	if in.IdempotencyKey != nil && (*in.IdempotencyKey == "" || len(*in.IdempotencyKey) > maxIdempotencyKey) {
		return clasp.InvalidField("idempotencyKey", "Field \"idempotencyKey\" must be 1 to %d characters.", maxIdempotencyKey)
	}
	return nil
}

// wakeOut is the answer of a wakeup: the wake request and what it did.
type wakeOut struct {
	WakeID         string     `json:"wakeId"`
	Status         string     `json:"status"` // queued, coalesced, deferred, skipped
	RunID          *string    `json:"runId"`  // the queued or coalesced run
	Run            *clasp.Run `json:"run"`
	BlockedByRunID *string    `json:"blockedByRunId"` // a deferred wake's blocking run
	Replayed       bool       `json:"replayed"`       // an earlier wake with the same idempotency key
	// SkipReason and SkipMessage say why a skipped wake runs nothing:
	// agent_paused, agent_terminated, no_adapter, or not_workable (the
	// agent may no longer work the issue); the message says what to do.
	SkipReason  string `json:"skipReason,omitempty"`
	SkipMessage string `json:"skipMessage,omitempty"`
}

// Why a wake was skipped (wakeOut.SkipReason).
const (
	SkipAgentPaused     = "agent_paused"
	SkipAgentTerminated = "agent_terminated"
	SkipNoAdapter       = "no_adapter"
	SkipNotWorkable     = "not_workable"
)

// wakeSkipReason says why a wake of agent id was skipped, from the agent
// and its adapter as they are now (the store decides skipped for an agent
// that is not active or has no adapter; anything else is the issue's
// state at promotion).
func (s *Server) wakeSkipReason(ctx context.Context, hst store.HeartbeatStore, id string) (reason, msg string) {
	a, err := s.st.AgentGet(ctx, id)
	if err != nil {
		return "", ""
	}
	switch a.Status {
	case clasp.AgentPaused:
		return SkipAgentPaused, fmt.Sprintf("Agent %s is paused: resume it (clasp agent resume %s) and wake it again.", a.Name, a.ID)
	case clasp.AgentTerminated:
		return SkipAgentTerminated, fmt.Sprintf("Agent %s is terminated: it never runs again.", a.Name)
	}
	if cfg, err := hst.AgentAdapterGet(ctx, id); err == nil && cfg == nil {
		return SkipNoAdapter, fmt.Sprintf("Agent %s has no adapter, so the server has nothing to start: set one (clasp agent set-adapter %s --command PATH) and wake it again.", a.Name, a.ID)
	}
	return SkipNotWorkable, fmt.Sprintf("Agent %s may no longer work the issue (it is done, cancelled, or assigned to another agent).", a.Name)
}

// agentWakeup: POST /api/agents/{id}/wakeup {reason?, issueId?,
// idempotencyKey?} (the board, or the agent itself). Records a wake request
// (store.HeartbeatStore.Wake: queued, coalesced, deferred or skipped) and
// nudges the scheduler. The idempotency key is the body's, else the
// Idempotency-Key header; a repeat answers the first wake (replayed: true)
// and makes no run. 202 wakeOut; 403 forbidden for another agent of the
// company; 404 not_found for a missing agent or issue (also of another
// company); for an issue the woken agent may not check out (whoever asks,
// store.WakeIssueRefusal), 409 checkout_conflict (another agent's issue)
// or 422 precondition_failed (done or cancelled), nothing written.
func (s *Server) agentWakeup(ctx context.Context, c *call, in *agentWakeupIn) (int, any, error) {
	id := pathAgentID(c)
	if err := s.checkAgentVisible(ctx, c, id); err != nil {
		return 0, nil, err
	}
	if !c.who.board && c.who.agent.ID != id {
		if a, err := s.st.AgentGet(ctx, id); err != nil || a.CompanyID != c.who.agent.CompanyID {
			return 0, nil, notVisible("agent", id)
		}
		return 0, nil, clasp.Errorf(clasp.CodeForbidden, "An agent may wake only itself.")
	}
	hst, ok := s.st.(store.HeartbeatStore)
	if !ok {
		return 0, nil, errNoHeartbeat()
	}
	p := &store.WakeParams{AgentID: id, Reason: clasp.InvocationOnDemand, Actor: c.actor()}
	if in.Reason != nil {
		p.Reason = *in.Reason
	}
	if in.IssueID != nil {
		p.IssueID = *in.IssueID
	}
	if in.IdempotencyKey != nil {
		p.IdempotencyKey = *in.IdempotencyKey
	} else if key := c.r.Header.Get("Idempotency-Key"); key != "" {
		if _, err := idempotencyParams(c, key); err != nil {
			return 0, nil, err
		}
		p.IdempotencyKey = key
	}
	res, err := hst.Wake(ctx, p)
	if err != nil {
		return 0, nil, err
	}
	if s.cfg.Scheduler != nil && !res.Replayed {
		s.cfg.Scheduler.Nudge()
	}
	out := &wakeOut{WakeID: res.WakeID, Status: res.Outcome, Run: res.Run, BlockedByRunID: res.BlockedByRunID, Replayed: res.Replayed}
	if res.Run != nil {
		out.RunID = &res.Run.ID
	}
	if res.Outcome == store.WakeSkipped {
		out.SkipReason, out.SkipMessage = s.wakeSkipReason(ctx, hst, id)
	}
	return http.StatusAccepted, out, nil
}

// Run log headers of GET /api/runs/{id}/log.
const (
	// LogSizeHeader is the log's size in bytes when answered: a follower
	// asks again with ?offset=<size>.
	LogSizeHeader = "X-Clasp-Log-Size"
	// RunStatusHeader is the run's status when answered: a follower stops
	// once it is terminal and it has read up to the size.
	RunStatusHeader = "X-Clasp-Run-Status"
)

// visibleRun returns the run of the path's {id}: 404 not_found for a
// missing run or, for an agent, another agent's run (the board sees all).
func (s *Server) visibleRun(ctx context.Context, c *call) (*clasp.Run, error) {
	id := pathUUID(c, "id")
	run, err := s.st.RunGet(ctx, id)
	if err != nil {
		return nil, err
	}
	if !c.who.board && run.AgentID != c.who.agent.ID || !c.sees(run.CompanyID) {
		return nil, notVisible("run", id)
	}
	return run, nil
}

// runLog: GET /api/runs/{id}/log?offset=N (the board, or the run's agent):
// the captured stdout and stderr of a server-managed run as text/plain,
// from byte N (default 0; past the end: empty), with headers
// X-Clasp-Log-Size (the whole log's size now) and X-Clasp-Run-Status. 400
// invalid_request for a bad offset; 404 not_found for a missing run, one
// of another agent, or a run without a log.
func (s *Server) runLog(ctx context.Context, c *call) (int, any, error) {
	var offset int64
	if v := c.r.URL.Query().Get("offset"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, nil, clasp.InvalidField("offset", "Query parameter offset must be a byte offset, 0 or more, not %q.", truncate(v, 32))
		}
		offset = n
	}
	run, err := s.visibleRun(ctx, c)
	if err != nil {
		return 0, nil, err
	}
	noLog := clasp.Errorf(clasp.CodeNotFound, "Run %s has no log: only runs the server started have one.", run.ID)
	// A queued or just-started server run answers an empty log (size 0): a
	// follower that asks right after a wake must not be told the run has no
	// log (seen as a flaky TestManagedAgentCommands).
	if s.cfg.RunLogDir == "" {
		return 0, nil, noLog
	}
	f, err := os.Open(filepath.Join(s.cfg.RunLogDir, filepath.Base(run.ID)+".log"))
	var size int64
	switch {
	case errors.Is(err, os.ErrNotExist) && (run.Status == clasp.RunQueued || run.HostID != nil):
		// A run the server queued or started (it records its host) whose
		// process has not written its log file yet: the log is empty so far
		// and a follower polls on.
		f = nil
	case errors.Is(err, os.ErrNotExist):
		return 0, nil, noLog
	case err != nil:
		return 0, nil, err
	default:
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return 0, nil, err
		}
		size = fi.Size() // the log only grows; read up to the size announced
	}
	offset = min(offset, size)
	h := c.w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set(LogSizeHeader, strconv.FormatInt(size, 10))
	h.Set(RunStatusHeader, string(run.Status))
	h.Set("Content-Length", strconv.FormatInt(size-offset, 10))
	c.w.WriteHeader(http.StatusOK)
	if f != nil {
		_, _ = io.Copy(c.w, io.NewSectionReader(f, offset, size-offset))
	}
	return 0, streamed, nil
}

// runCancel: POST /api/runs/{id}/cancel (board). A run whose process this
// server's scheduler runs is stopped (SIGTERM to its process group, SIGKILL
// after a grace period) and ends cancelled once the process is gone, so the
// answer may still say running; any other live run (queued, a self-reported
// one, or one whose process another replica runs) is finished cancelled in
// the store at once (its locks released, rule L6), and the instance that
// runs its process stops it at its next pass. 200 run; 404 not_found; 409 run_not_live if it
// already ended.
func (s *Server) runCancel(ctx context.Context, c *call, _ *emptyIn) (int, any, error) {
	run, err := s.visibleRun(ctx, c)
	if err != nil {
		return 0, nil, err
	}
	if run.Status.Terminal() {
		return 0, nil, clasp.Errorf(clasp.CodeRunNotLive, "Run %s already ended (%s).", run.ID, run.Status).WithDetails("status", string(run.Status))
	}
	defer s.creds.forgetRun(run.ID)
	if s.cfg.Scheduler != nil && s.cfg.Scheduler.Cancel(run.ID) {
		if r, err := s.st.RunGet(ctx, run.ID); err == nil {
			run = r
		}
		return http.StatusOK, run, nil
	}
	msg := "cancelled by the board"
	run, err = s.st.RunFinish(ctx, &store.RunFinishParams{RunID: run.ID, Status: clasp.RunCancelled, Error: &msg, Actor: c.actor()})
	if err != nil {
		return 0, nil, err
	}
	if s.cfg.Scheduler != nil {
		s.cfg.Scheduler.Nudge() // a slot may be free, deferred wakes promoted
	}
	return http.StatusOK, run, nil
}
