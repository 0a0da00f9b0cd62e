package store

// Error builders shared by both dialects and the HTTP layer: one builder
// per error shape, so that a code always comes with the same details keys.

import (
	"fmt"

	"github.com/clasp-dev/clasp"
)

// ErrNotFound is 404 not_found naming the kind of resource and the
// reference asked for (details none: a caller learns nothing of resources
// it may not see).
func ErrNotFound(kind, ref string) *clasp.Error {
	return clasp.Errorf(clasp.CodeNotFound, "No %s %q (or it is not visible to you).", kind, ref)
}

// ErrUnauthenticated is 401 unauthenticated for credentials that name no
// usable agent: unknown, revoked, or of a terminated agent.
func ErrUnauthenticated() *clasp.Error {
	return clasp.Errorf(clasp.CodeUnauthenticated, "The credentials are unknown, revoked or of a terminated agent.")
}

// ErrAgentMismatch is 403 agent_mismatch: an agent (callerID) asked to
// check an issue out for another agent (given). details.field is
// "agentId" and details.agentId the agent given.
func ErrAgentMismatch(callerID, given string) *clasp.Error {
	return clasp.Errorf(clasp.CodeAgentMismatch, "An agent checks out only for itself: agentId must be %s.", callerID).
		WithDetails("field", "agentId", "agentId", given)
}

// ErrRunNotFound is 422 run_not_found: the run named by the caller does
// not exist. details.runId names it.
func ErrRunNotFound(runID string) *clasp.Error {
	return clasp.Errorf(clasp.CodeRunNotFound, "Run %s does not exist.", runID).WithDetails("runId", runID)
}

// ErrRunNotOwned is 403 run_not_owned: the run named belongs to another
// agent (or, otherCompany, to another company). details.runId names it.
func ErrRunNotOwned(runID string, otherCompany bool) *clasp.Error {
	whose := "agent"
	if otherCompany {
		whose = "company"
	}
	return clasp.Errorf(clasp.CodeRunNotOwned, "Run %s belongs to another %s.", runID, whose).WithDetails("runId", runID)
}

// ErrRunNotLive is 409 run_not_live: run runID, in state ("succeeded",
// "lost", ...), can no longer act. details.runId names it.
func ErrRunNotLive(runID, state string) *clasp.Error {
	return clasp.Errorf(clasp.CodeRunNotLive, "Run %s is %s: it can no longer act; open a new run.", runID, state).
		WithDetails("runId", runID)
}

// RunRefusal explains why a finish of run runID by actor a matched
// nothing, from the run as read next (r; its State is "live" or the word
// for why it is not: RunLost or RunTerminal). For an agent: 404 not_found
// when the run is missing or of another company, 403 run_not_owned when it
// is another agent's, 409 run_not_live when it is not live. For the board:
// 404 when missing, else 409 run_not_live. An internal error when nothing
// explains the refusal.
func RunRefusal(a Actor, runID string, r RunState) error {
	agent := a.Type == clasp.ActorAgent
	switch {
	case !r.Found, agent && r.CompanyID != a.CompanyID:
		return ErrNotFound("run", runID)
	case agent && r.AgentID != a.AgentID:
		return ErrRunNotOwned(runID, false)
	case r.State != "live" || !agent:
		return clasp.Errorf(clasp.CodeRunNotLive, "Run %s is %s: it has ended already.", runID, r.State).WithDetails("runId", runID)
	}
	return fmt.Errorf("finish run %s: refused for no known reason", runID)
}
