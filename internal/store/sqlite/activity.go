package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// logActivity appends one audit row, attributed to actor (and the run it
// acts in), in the transaction's time. details is marshalled to a JSON
// object.
func (t *wtx) logActivity(ctx context.Context, companyID string, actor store.Actor, action, entityType, entityID string, details any) error {
	b, err := json.Marshal(details)
	if err != nil {
		return fmt.Errorf("activity %s details: %w", action, err)
	}
	actorType := actor.Type
	if actorType != clasp.ActorAgent && actorType != clasp.ActorBoard {
		actorType = clasp.ActorSystem
	}
	if _, err := t.exec(ctx, "ActivityInsert", activityArgs(companyID, string(actorType), actor.ID(),
		nullable(actor.RunID), action, entityType, entityID, string(b), t.now, nullable(actor.RequestID))...); err != nil {
		return fmt.Errorf("write activity %s of %s %s: %w", action, entityType, entityID, err)
	}
	t.wroteActivity = true
	return nil
}

// activityArgs are the arguments of statement ActivityInsert.
func activityArgs(companyID, actorType, actorID string, actorRun any, action, entityType, entityID, details string, now int64, request any) []any {
	return []any{sql.Named("company", companyID), sql.Named("actor_type", actorType), sql.Named("actor_id", actorID),
		sql.Named("actor_run", actorRun), sql.Named("action", action), sql.Named("entity_type", entityType),
		sql.Named("entity_id", entityID), sql.Named("details", details), sql.Named("now", now), sql.Named("actor_request", request)}
}

// logRule runs activity statement name of sql/lock.sql, an INSERT ...
// SELECT that writes the activity rows of a lock rule's write (or the
// sweeper's) from the issue as written and args (the state before it,
// among them the id), attributed to actor a in the transaction's
// time. What rows it writes is the statement's decision.
func (t *wtx) logRule(ctx context.Context, name string, a store.Actor, args store.Args) error {
	n, err := writer{t}.Exec(ctx, name, store.ActorArgs(args, a))
	if err != nil {
		return fmt.Errorf("write activity %s: %w", name, err)
	}
	if n > 0 {
		t.wroteActivity = true
	}
	return nil
}

// oldLockArgs adds to args issue id and its lock state before a rule's
// write, as the activity statements read it (old_status, old_assignee,
// old_checkout, old_execution, checkout_state, execution_state), and
// returns args.
func oldLockArgs(args store.Args, id string, old *store.LockState) store.Args {
	args["id"], args["old_status"], args["old_assignee"] = id, old.Status, store.OrNil(old.Assignee)
	args["old_checkout"], args["old_execution"] = store.OrNil(old.Checkout), store.OrNil(old.Execution)
	args["checkout_state"], args["execution_state"] = store.OrNil(old.CheckoutState), store.OrNil(old.ExecutionState)
	return args
}
