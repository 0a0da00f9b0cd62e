package store

// Validation and refusals of agents, keys and self-reported runs, written
// once for both dialects: a dialect calls these before its statement (the
// validation) or after a statement that matched nothing (the refusal).

import (
	"cmp"
	"strings"
	"time"

	"github.com/clasp-dev/clasp"
)

// Validate checks an agent to create: the name, trimmed, is returned; 400
// invalid_request (details.field name) when it is empty.
func (p *AgentCreateParams) Validate() (name string, err error) {
	name = strings.TrimSpace(p.Name)
	if name == "" {
		return "", clasp.InvalidField("name", "name is required.")
	}
	return name, nil
}

// AgentChange is a validated AgentUpdateParams: the columns to set (nil:
// unchanged) and the agent.updated details.
type AgentChange struct {
	Status, Name, NameKey, Role *string
	Details                     map[string]any // {status, name, role}: what changes
	Terminates                  bool           // Status is terminated
}

// Validate checks an agent change: 400 invalid_request (details.field
// status) for a status other than active, paused or terminated, (field
// name) for a name empty once trimmed.
func (p *AgentUpdateParams) Validate() (*AgentChange, error) {
	c := &AgentChange{Details: map[string]any{}, Role: p.Role}
	if p.Status != nil {
		if !p.Status.Valid() {
			return nil, clasp.InvalidField("status", "status must be active, paused or terminated.")
		}
		c.Status, c.Details["status"] = Optional(string(*p.Status)), *p.Status
		c.Terminates = *p.Status == clasp.AgentTerminated
	}
	if p.Name != nil {
		n := strings.TrimSpace(*p.Name)
		if n == "" {
			return nil, clasp.InvalidField("name", "name must not be empty.")
		}
		c.Name, c.NameKey, c.Details["name"] = &n, Optional(clasp.NameKey(n)), n
	}
	if p.Role != nil {
		c.Details["role"] = *p.Role
	}
	return c, nil
}

// ErrAgentNameTaken is 409 already_exists (details.field name): the
// company has an agent with that name key.
func ErrAgentNameTaken(name string) *clasp.Error {
	return clasp.Errorf(clasp.CodeAlreadyExists, "The company has an agent named %q already.", name).WithDetails("field", "name")
}

// AgentUpdateRefusal explains an agent update that matched no row, from
// the agent as read next (nil: missing): 404 not_found, or 422
// precondition_failed (details.field status) for a terminated agent, whose
// status is final. nil when nothing explains it.
func AgentUpdateRefusal(agentID string, cur *clasp.Agent) error {
	switch {
	case cur == nil:
		return ErrNotFound("agent", agentID)
	case cur.Status == clasp.AgentTerminated:
		return clasp.Errorf(clasp.CodePreconditionFailed,
			"Agent %s is terminated, which is final: its status cannot change; create a new agent instead.", agentID).
			WithDetails("field", "status")
	}
	return nil
}

// KeyName is the name a key is stored with: name, or DefaultKeyName when
// it is empty.
func KeyName(name string) string { return cmp.Or(name, DefaultKeyName) }

// Check validates a run to open and fills its defaults: the lease (LeaseTTL,
// or DefaultLeaseTTL when not positive) and the invocation source (self
// when empty). 403 forbidden when an agent opens a run for another agent.
func (p *RunOpenParams) Check() (ttl time.Duration, source string, err error) {
	if p.Actor.Type == clasp.ActorAgent && p.Actor.AgentID != p.AgentID {
		return 0, "", clasp.Errorf(clasp.CodeForbidden, "An agent opens runs only for itself.")
	}
	ttl = p.LeaseTTL
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	return ttl, cmp.Or(p.InvocationSource, clasp.InvocationSelf), nil
}

// TTL is the lease a touch renews to: p.LeaseTTL, or DefaultLeaseTTL
// when not positive.
func (p *RunTouchParams) TTL() time.Duration {
	if p.LeaseTTL <= 0 {
		return DefaultLeaseTTL
	}
	return p.LeaseTTL
}

// ErrLiveRunsLimit is 429 rate_limited: agent agentID already has limit live
// runs (RunOpenParams.MaxLive), its limit. details.limit names the limit, and
// details.retryAfterSeconds is a lease's length at most: a run the agent
// no longer uses ends by finishing it, or when its lease runs out.
func ErrLiveRunsLimit(agentID string, limit int, lease time.Duration) *clasp.Error {
	retry := max(int(lease.Seconds()), 1)
	return clasp.Errorf(clasp.CodeRateLimited, "Agent %s is at its limit of %d live runs (serve --max-live-runs-per-agent): finish a run it no longer uses (POST /api/runs/{id}/finish) or wait for one's lease to run out; retry after %d s.", agentID, limit, retry).
		WithDetails("limit", "live runs per agent").WithDetails("max", limit).WithDetails("retryAfterSeconds", retry)
}

// ErrAgentTerminated is 403 forbidden: a terminated agent opens no run.
func ErrAgentTerminated(agentID string) *clasp.Error {
	return clasp.Errorf(clasp.CodeForbidden, "Agent %s is terminated.", agentID)
}

// RunReplayRefusal explains a replayed RunOpen (Idempotency-Key) whose
// renewal matched nothing, from the recorded run as read next (r: whether
// it exists, its agent and state, "live" or why not). 404 not_found
// when it is missing or not agentID's; 422 idempotency_key_reused while it
// is live with another token hash (ErrRunReplayOtherToken); else 409
// run_not_live: its token cannot be issued again.
func RunReplayRefusal(runID, agentID string, r RunState) error {
	switch {
	case !r.Found, r.AgentID != agentID:
		return ErrNotFound("run", runID)
	case r.State == "live":
		return ErrRunReplayOtherToken(runID)
	}
	return clasp.Errorf(clasp.CodeRunNotLive,
		"Run %s, opened earlier with this Idempotency-Key, is %s: its run token cannot be issued again; open a new run with a new Idempotency-Key.",
		runID, r.State).WithDetails("runId", runID)
}

// RunTouchRefusal explains a sign of life of run runID by agentID that
// renewed nothing, from the run as read next (r): 422 run_not_found, 403 run_not_owned, 409 run_not_live. nil when
// the run is agentID's and live (nothing explains the refusal).
func RunTouchRefusal(runID, agentID string, r RunState) error {
	switch {
	case !r.Found:
		return ErrRunNotFound(runID)
	case r.AgentID != agentID:
		return ErrRunNotOwned(runID, false)
	case r.State != "live":
		return ErrRunNotLive(runID, r.State)
	}
	return nil
}
