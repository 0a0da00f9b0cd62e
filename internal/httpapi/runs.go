package httpapi

import (
	"context"
	"math"
	"net/http"
	"strings"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// refusePaused answers 422 precondition_failed when the calling agent is
// paused: a paused agent opens no run and checks out or claims nothing,
// until it is resumed; what it already holds it may still finish (PATCH,
// release, comments, heartbeat, run finish), and pausing cancels its queued
// runs. The status is the one read at authentication. The board is never
// refused.
func refusePaused(c *call, what string) error {
	if c.who.board || c.who.agent == nil || c.who.agent.Status != clasp.AgentPaused {
		return nil
	}
	return clasp.Errorf(clasp.CodePreconditionFailed, "Agent %s is paused: it cannot %s until it is resumed (clasp agent resume).", c.who.agent.ID, what).
		WithDetails("agentId", c.who.agent.ID).WithDetails("agentStatus", string(clasp.AgentPaused))
}

// runOpenIn is the body of POST /api/agents/me/runs.
type runOpenIn struct {
	IssueID          *string `json:"issueId"`
	InvocationSource *string `json:"invocationSource"`
}

func (in *runOpenIn) validate() error {
	if in.IssueID != nil && !validIssueRef(*in.IssueID) {
		return clasp.InvalidField("issueId", "Field \"issueId\" must be an issue's UUID or its identifier (PREFIX-N, such as ENG-12), not %q.", truncate(*in.IssueID, 64))
	}
	if in.InvocationSource != nil {
		if err := requiredText("invocationSource", in.InvocationSource, maxSourceLen); err != nil {
			return err
		}
	}
	return nil
}

// runOpen: POST /api/agents/me/runs (agent). Opens a self-reported run,
// running with lease now + LeaseTTL (+ the renewal interval, Server.lease), and answers 201 with the run and its
// runToken (a credential bound to this run, shown this once). 404 if
// issueId names no issue of the agent's company; 429 rate_limited when
// the agent already has Limits.LiveRunsPerAgent live runs, or has used up
// its creates (Limits.CreatesPerAgentMinute). Revoking the API key it was
// opened with ends the run. A repeat with the same
// Idempotency-Key opens nothing: it answers the run opened first with a
// fresh runToken (the earlier token stops working, as only token hashes are
// stored), or 409 run_not_live once that run has ended.
func (s *Server) runOpen(ctx context.Context, c *call, in *runOpenIn) (int, any, error) {
	if c.who.tokenRun != nil {
		// A run token is a credential bound to that run alone (RULES.md,
		// Actors and credentials). Opening runs with it would let a token
		// minted under a key outlive the key's revocation through a chain
		// of new runs.
		return 0, nil, clasp.Errorf(clasp.CodeForbidden, "A run token acts only for its own run; open a run with the agent's API key.")
	}
	if err := refusePaused(c, "open runs"); err != nil {
		return 0, nil, err
	}
	charge, err := s.admitCreate(c, "this run is")
	if err != nil {
		return 0, nil, err
	}
	token, hash := NewToken(TokenRun)
	p := &store.RunOpenParams{
		AgentID:          c.who.agent.ID,
		InvocationSource: clasp.InvocationSelf,
		LeaseTTL:         s.lease,
		TokenHash:        hash,
		// Revoking the key ends the run (and its token); the agent's
		// live runs are capped however many keys it holds.
		KeyHash:     c.who.hash,
		MaxLive:     max(s.limits.LiveRunsPerAgent, 0),
		Actor:       c.actor(),
		Idempotency: c.idem,
	}
	if c.idem != nil && c.who.key != "" {
		// A replay answers the run opened first with the same token, so
		// that none given out stops working: it is derived, not stored.
		p.TokenHashFor = func(runID string) string { return HashToken(runTokenFor(c.who.key, runID)) }
	}
	if in.IssueID != nil {
		p.IssueID = *in.IssueID
	}
	if in.InvocationSource != nil {
		p.InvocationSource = *in.InvocationSource
	}
	run, err := s.st.RunOpen(ctx, p)
	if err != nil {
		return 0, nil, err // a refused open (the live-run limit among others) created nothing
	}
	charge()
	run.RunToken = token
	if p.TokenHashFor != nil {
		run.RunToken = runTokenFor(c.who.key, run.ID)
	}
	return http.StatusCreated, run, nil
}

// runHeartbeat: POST /api/runs/{id}/heartbeat (the run's agent). The
// endpoint's forced touch already renewed the lease; 200 run. 409
// run_not_live if the run is terminal or lost, 403 run_not_owned, 404
// not_found (also for another company's run).
func (s *Server) runHeartbeat(ctx context.Context, c *call, _ *emptyIn) (int, any, error) {
	return http.StatusOK, c.run, nil
}

// runFinishIn is the body of POST /api/runs/{id}/finish.
type runFinishIn struct {
	Status   *clasp.RunStatus `json:"status"`
	ExitCode *int             `json:"exitCode"`
	Error    *string          `json:"error"`
}

func (in *runFinishIn) validate() error {
	if in.Status == nil {
		return clasp.InvalidField("status", "Field \"status\" is required: succeeded, failed, cancelled or timed_out.")
	}
	if !in.Status.Terminal() {
		return clasp.InvalidField("status", "Field \"status\" must be one of succeeded, failed, cancelled, timed_out; not %q.", truncate(string(*in.Status), 64))
	}
	if in.ExitCode != nil && (*in.ExitCode < math.MinInt32 || *in.ExitCode > math.MaxInt32) {
		return clasp.InvalidField("exitCode", "Field \"exitCode\" must be a 32-bit integer (a process exit status); got %d.", *in.ExitCode)
	}
	return optionalText("error", in.Error, maxRunErrorLen)
}

// runFinish: POST /api/runs/{id}/finish (the run's agent, or the board). It
// ends the run and, in the same transaction, releases every lock naming it
// (rule L6). 200 run; 409 run_not_live if it already ended (or, for its
// agent, was lost); 404 not_found for a missing run or, for an agent,
// another company's.
func (s *Server) runFinish(ctx context.Context, c *call, in *runFinishIn) (int, any, error) {
	runID := c.runID // the agent's: checked and touched
	if c.who.board {
		run, err := s.visibleRun(ctx, c)
		if err != nil {
			return 0, nil, err
		}
		runID = run.ID
	}
	run, err := s.st.RunFinish(ctx, &store.RunFinishParams{RunID: runID, Status: *in.Status, ExitCode: in.ExitCode, Error: in.Error, Actor: c.actor()})
	s.creds.forgetRun(runID)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, run, nil
}

// runGet: GET /api/runs/{id} (board, or an agent of the run's company). 404 not_found.
func (s *Server) runGet(ctx context.Context, c *call) (int, any, error) {
	id := pathUUID(c, "id")
	run, err := s.st.RunGet(ctx, id)
	if err != nil {
		return 0, nil, err
	}
	if !c.sees(run.CompanyID) {
		return 0, nil, notVisible("run", id)
	}
	return http.StatusOK, run, nil
}

// runList: GET /api/companies/{companyId}/runs?status=a,b&agentId=&limit=&cursor=
// (board, or an agent of the company), newest first.
func (s *Server) runList(ctx context.Context, c *call) (int, any, error) {
	q := c.r.URL.Query()
	page, err := pageParams(q)
	if err != nil {
		return 0, nil, err
	}
	p := &store.RunListParams{Page: page}
	if v := q.Get("status"); v != "" {
		for _, part := range strings.Split(v, ",") {
			st := clasp.RunStatus(strings.TrimSpace(part))
			if !st.Valid() {
				return 0, nil, clasp.InvalidField("status", "Query parameter status lists run statuses (queued, running, succeeded, failed, cancelled, timed_out), not %q.", truncate(part, 64))
			}
			p.Statuses = append(p.Statuses, st)
		}
	}
	if p.AgentID, err = uuidParam(q, "agentId", "an agent id (a UUID)"); err != nil {
		return 0, nil, err
	}
	if p.CompanyID, err = s.companyID(ctx, c); err != nil {
		return 0, nil, err
	}
	items, next, err := s.st.RunList(ctx, p)
	if err != nil {
		return 0, nil, err
	}
	setNextLink(c, "cursor", next)
	return http.StatusOK, list(items), nil
}

// notVisible is the 404 for an object that exists but is not the caller's
// (another company's, or another agent's run log): the very answer the
// stores give for a missing one (store "not found" errors), so that an
// answer never tells whether an id exists elsewhere.
func notVisible(kind, ref string) error {
	return clasp.Errorf(clasp.CodeNotFound, "No %s %q (or it is not visible to you).", kind, ref)
}
