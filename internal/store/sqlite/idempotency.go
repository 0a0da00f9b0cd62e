package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/clasp-dev/clasp/internal/store"
)

// idempotencyRecord records, in the creating transaction, that (actor, key)
// created resource id of kind. p == nil records nothing.
func (t *wtx) idempotencyRecord(ctx context.Context, p *store.IdempotencyParams, kind, id string) error {
	if p == nil {
		return nil
	}
	var one int
	err := t.queryRow(ctx, "IdempotencyInsert", sql.Named("actor", p.ActorID), sql.Named("key", p.Key),
		sql.Named("hash", p.RequestHash), sql.Named("type", kind), sql.Named("id", id),
		sql.Named("now", t.now), sql.Named("window", store.IdempotencyWindow.Microseconds())).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("record idempotency key: a record in force appeared within the transaction")
	}
	return wrap(err, "record idempotency key")
}
