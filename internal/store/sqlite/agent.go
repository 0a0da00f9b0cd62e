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

// OpenIssues reads the issues assigned to agentID that are not done or
// cancelled with their lock state (statement AgentOpenIssues), in the
// transaction that unassigns them, for the activity rows of that.
func (h hbtx) OpenIssues(ctx context.Context, agentID string) ([]*store.LockState, error) {
	rows, err := h.Query(ctx, "AgentOpenIssues", store.Args{"agent": agentID})
	if err != nil {
		return nil, err
	}
	return store.ScanAll(rows, func(sc store.Row) (*store.LockState, error) {
		var l store.LockState
		return &l, sc.Scan(&l.IssueID, &l.CompanyID, &l.Status, &l.Assignee, &l.Checkout, &l.Execution)
	})
}
