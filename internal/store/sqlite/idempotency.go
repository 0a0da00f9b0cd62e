package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/clasp-dev/clasp/internal/store"
)

// idempotencyLookup is the first step of a creating call with an
// Idempotency-Key (store.IdempotencyParams), in its write transaction. It
// returns the id of the resource of kind recorded for (actor, key) within
// the window, or "" when there is none (the caller creates, then calls
// idempotencyRecord). 422 idempotency_key_reused if the record is of
// another request (hash) or another kind of resource; 400 invalid_request
// for an empty actor or key. p == nil returns "".
func (t *wtx) idempotencyLookup(ctx context.Context, p *store.IdempotencyParams, kind string) (string, error) {
	if ok, err := p.Start(); !ok {
		return "", err
	}
	window := store.IdempotencyWindow.Microseconds()
	if last := t.s.idemSweptAt.Load(); t.now-last >= store.IdempotencyPurgeEvery.Microseconds() && t.s.idemSweptAt.CompareAndSwap(last, t.now) {
		if _, err := t.exec(ctx, "IdempotencyPurge", sql.Named("window", window), sql.Named("now", t.now)); err != nil {
			return "", fmt.Errorf("purge idempotency records: %w", err)
		}
	}
	var hash, gotKind, id string
	err := t.queryRow(ctx, "IdempotencyGet", sql.Named("actor", p.ActorID), sql.Named("key", p.Key),
		sql.Named("now", t.now), sql.Named("window", window)).Scan(&hash, &gotKind, &id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("read idempotency record: %w", err)
	}
	if err := p.Match(hash, gotKind, kind); err != nil {
		return "", err
	}
	return id, nil
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
