package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/clasp-dev/clasp/internal/store"
)

// idemArgs adds store.IdemArgs, the arguments of a statement's CTE rec
// (the record of an Idempotency-Key), to args.
func idemArgs(args namedArgs, p *store.IdempotencyParams, kind string) namedArgs {
	return namedArgs(store.IdemArgs(store.Args(args), p, kind))
}

// idempotencyLookup is the first step of a creating call with an
// Idempotency-Key (store.IdempotencyParams). It returns the id of the
// resource of kind recorded for (actor, key) within the window, or "" when
// there is none (the caller creates, recording it with
// CTE rec). 422 idempotency_key_reused if the record is of
// another request (hash) or another kind of resource; 400 invalid_request
// for an empty actor or key. p == nil returns "".
func (s *Store) idempotencyLookup(ctx context.Context, p *store.IdempotencyParams, kind string) (string, error) {
	if ok, err := p.Start(); !ok {
		return "", err
	}
	window := store.IdempotencyWindow.Microseconds()
	if last := s.idemPurgedAt.Load(); time.Since(time.Unix(0, last)) >= store.IdempotencyPurgeEvery &&
		s.idemPurgedAt.CompareAndSwap(last, time.Now().UnixNano()) {
		if _, err := s.pool.Exec(ctx, q("IdempotencyPurge"), namedArgs{"window": window}); err != nil {
			return "", translate(fmt.Errorf("purge idempotency records: %w", err))
		}
	}
	var hash, gotKind, id string
	err := s.retry(ctx, func() error {
		return s.pool.QueryRow(ctx, q("IdempotencyGet"), namedArgs{"actor": p.ActorID, "key": p.Key, "window": window}).Scan(&hash, &gotKind, &id)
	})
	switch {
	case isNotFound(err):
		return "", nil
	case err != nil:
		return "", wrap(err, "read idempotency record")
	}
	if err := p.Match(hash, gotKind, kind); err != nil {
		return "", err
	}
	return id, nil
}

// idempotent runs a creating call with an optional Idempotency-Key: it
// looks the key up; a recorded resource is answered by replay(id) (and
// p.Replayed set), else create() runs, recording the key in its statement.
// When that record fails because a concurrent duplicate recorded the key
// first, the whole call runs again, and then replays.
func idempotent[T any](ctx context.Context, s *Store, p *store.IdempotencyParams, kind string,
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
