package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/clasp-dev/clasp/internal/store"
)

// logActivity appends one audit row in transaction tx, attributed to actor
// (and the run it acts in). details is marshalled to a JSON object.
func logActivity(ctx context.Context, tx pgx.Tx, companyID string, actor store.Actor, action, entityType, entityID string, details any) error {
	b, err := json.Marshal(details)
	if err != nil {
		return fmt.Errorf("activity %s details: %w", action, err)
	}
	args := actorArgs(namedArgs{"company": companyID, "action": action, "entity_type": entityType, "entity_id": entityID,
		"details": string(b)}, actor)
	if _, err := tx.Exec(ctx, q("ActivityInsert"), args); err != nil {
		return fmt.Errorf("write activity %s of %s %s: %w", action, entityType, entityID, err)
	}
	return nil
}
