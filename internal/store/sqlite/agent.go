package sqlite

import (
	"context"

	"github.com/clasp-dev/clasp/internal/store"
)

// Activity records the audit row of a change made in the transaction
// (logActivity): the shared algorithms that run on a store.TxRunner write
// their activity rows through it, as through writer.
func (h hbtx) Activity(ctx context.Context, companyID string, actor store.Actor, action, entityType, entityID string, details any) error {
	return h.t.logActivity(ctx, companyID, actor, action, entityType, entityID, details)
}

// UnassignIssues is rule L6 for agent agentID being terminated
// (store.HeartbeatTx.UnassignIssues) in two statements of the write
// transaction: AgentUnassignActivity writes the activity rows, attributed
// to actor, from the issues AgentUnassignIssues then unassigns, as they
// stand before it. The transaction holds the write lock, so both
// statements see the same issues.
func (h hbtx) UnassignIssues(ctx context.Context, agentID string, actor store.Actor) error {
	if err := h.t.logRule(ctx, "AgentUnassignActivity", actor, store.Args{"agent": agentID}); err != nil {
		return err
	}
	_, err := h.Exec(ctx, "AgentUnassignIssues", store.Args{"agent": agentID})
	return store.Wrap(err, "unassign the issues of agent %s", agentID)
}
