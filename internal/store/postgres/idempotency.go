package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/clasp-dev/clasp/internal/store"
)

// idemArgs adds store.IdemArgs, the arguments of a statement's CTE rec
// (the record of an Idempotency-Key), to args.
func idemArgs(args namedArgs, p *store.IdempotencyParams, kind string) namedArgs {
	return namedArgs(store.IdemArgs(store.Args(args), p, kind))
}

// idempotencyLookup is store.CRUD.IdempotencyLookup on the pool,
// retried on a deadlock or serialization failure: the id of the resource
// of kind recorded for p's (actor, key), or "" when there is none (the
// caller creates, recording it with CTE rec). 422 idempotency_key_reused;
// 400 invalid_request.
func (s *Driver) idempotencyLookup(ctx context.Context, p *store.IdempotencyParams, kind string) (string, error) {
	var id string
	err := s.WriteQuiet(ctx, func(q store.Querier) (err error) {
		id, err = store.NewCRUD(s).IdempotencyLookup(ctx, q, p, kind)
		return err
	})
	return id, err
}

// idempotent runs a creating call with an optional Idempotency-Key: it
// looks the key up; a recorded resource is answered by replay(id) (and
// p.Replayed set), else create() runs, recording the key in its statement.
// When that record fails because a concurrent duplicate recorded the key
// first, the whole call runs again, and then replays.
func idempotent[T any](ctx context.Context, s *Driver, p *store.IdempotencyParams, kind string,
	replay func(id string) (T, error), create func() (T, error)) (T, error) {
	var zero T
	for range 3 {
		id, err := s.idempotencyLookup(ctx, p, kind)
		if err != nil {
			return zero, err
		}
		if id != "" {
			v, err := replay(id)
			if err == nil {
				p.Replayed = true
			}
			return v, err
		}
		v, err := create()
		if !isIdempotencyConflict(err) {
			return v, err
		}
	}
	return zero, fmt.Errorf("idempotency key %q: the record kept changing", p.Key)
}

// isIdempotencyConflict reports whether err is the unique violation of an
// idempotency record (a concurrent duplicate recorded the key first).
func isIdempotencyConflict(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.TableName == "idempotency_keys"
}
