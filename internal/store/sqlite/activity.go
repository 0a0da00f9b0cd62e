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
