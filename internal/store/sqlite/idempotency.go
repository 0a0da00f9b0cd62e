package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/clasp-dev/clasp/internal/store"
)

// idempotencyLookup is store.CRUD.IdempotencyLookup in the write
// transaction t: the id of the resource of kind recorded for p's (actor,
// key), or "" when there is none (the caller creates, then calls
// idempotencyRecord). 422 idempotency_key_reused; 400 invalid_request.
func (t *wtx) idempotencyLookup(ctx context.Context, p *store.IdempotencyParams, kind string) (string, error) {
	return store.NewCRUD(t.s).IdempotencyLookup(ctx, writer{t}, p, kind)
}

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
