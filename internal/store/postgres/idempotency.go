package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// idempotencyPurgeEvery spaces this process's deletions of expired records.
const idempotencyPurgeEvery = time.Hour

// Kinds of resource an idempotency record names (column resource_type).
const (
	idemIssue   = "issue"
	idemComment = "comment"
	idemRun     = "run"
	// idemIssueUpdate names an issue a PATCH updated (IssueUpdate).
	idemIssueUpdate = "issue_update"
)

const (
	// sqlIdempotencyLookup drops the expired record of (actor, key), if
	// any, and reads the one in force (written less than the window ago,
	// by the database clock).
	sqlIdempotencyLookup = `WITH expired AS (
		DELETE FROM idempotency_keys
		WHERE actor_id = $1 AND key = $2 AND created_at <= now() - $3::bigint * interval '1 microsecond'
	)
	SELECT request_hash, resource_type, resource_id FROM idempotency_keys
	WHERE actor_id = $1 AND key = $2 AND created_at > now() - $3::bigint * interval '1 microsecond'`
	sqlIdempotencyPurge = `DELETE FROM idempotency_keys WHERE created_at <= now() - $1::bigint * interval '1 microsecond'`

	// sqlIdempotencyRecordCTE is CTE rec of a creating statement: the record
	// (@idem_actor, @idem_key) -> the resource @id of kind @idem_type, when
	// @idem_key is set and the resource was created (made) in the same
	// statement. A record in force that committed since the lookup (a
	// concurrent duplicate) makes it fail on the primary key, and the whole
	// statement, creation included, with it.
	sqlIdempotencyRecordCTE = `rec AS (
		INSERT INTO idempotency_keys (actor_id, key, request_hash, resource_type, resource_id, created_at)
		SELECT @idem_actor::text, @idem_key::text, @idem_hash::text, @idem_type::text, made.id, now()
		FROM made WHERE @idem_key::text IS NOT NULL
	)`
	// sqlIdempotencyRecordUpdateCTE is sqlIdempotencyRecordCTE for a lock
	// rule that updates an issue (sqlPatch): the record names the issue
	// CTE upd wrote, and nothing is recorded when upd wrote nothing.
	sqlIdempotencyRecordUpdateCTE = `rec AS (
		INSERT INTO idempotency_keys (actor_id, key, request_hash, resource_type, resource_id, created_at)
		SELECT @idem_actor::text, @idem_key::text, @idem_hash::text, @idem_type::text, upd.id, now()
		FROM upd WHERE @idem_key::text IS NOT NULL
	)`
)

// idemArgs adds the arguments of sqlIdempotencyRecordCTE to args.
func idemArgs(args namedArgs, p *store.IdempotencyParams, kind string) namedArgs {
	args["idem_type"] = kind
	args["idem_actor"], args["idem_key"], args["idem_hash"] = nil, nil, nil
	if p != nil {
		args["idem_actor"], args["idem_key"], args["idem_hash"] = p.ActorID, p.Key, p.RequestHash
	}
	return args
}

// idempotencyLookup is the first step of a creating call with an
// Idempotency-Key (store.IdempotencyParams). It returns the id of the
// resource of kind recorded for (actor, key) within the window, or "" when
// there is none (the caller creates, recording it with
// sqlIdempotencyRecordCTE). 422 idempotency_key_reused if the record is of
// another request (hash) or another kind of resource; 400 invalid_request
// for an empty actor or key. p == nil returns "".
func (s *Store) idempotencyLookup(ctx context.Context, p *store.IdempotencyParams, kind string) (string, error) {
	if p == nil {
		return "", nil
	}
	p.Replayed = false
	if p.ActorID == "" || p.Key == "" {
		return "", clasp.InvalidField("Idempotency-Key", "An Idempotency-Key needs a key and an actor.")
	}
	window := store.IdempotencyWindow.Microseconds()
	if last := s.idemPurgedAt.Load(); time.Since(time.Unix(0, last)) >= idempotencyPurgeEvery &&
		s.idemPurgedAt.CompareAndSwap(last, time.Now().UnixNano()) {
		if _, err := s.pool.Exec(ctx, sqlIdempotencyPurge, window); err != nil {
			return "", translate(fmt.Errorf("purge idempotency records: %w", err))
		}
	}
	var hash, gotKind, id string
	err := s.retry(ctx, func() error {
		return s.pool.QueryRow(ctx, sqlIdempotencyLookup, p.ActorID, p.Key, window).Scan(&hash, &gotKind, &id)
	})
	switch {
	case isNotFound(err):
		return "", nil
	case err != nil:
		return "", wrap(err, "read idempotency record")
	case hash != p.RequestHash || gotKind != kind:
		return "", clasp.Errorf(clasp.CodeIdempotencyKeyReused,
			"This Idempotency-Key was used for a different request in the last 24 hours; use a new key.").
			WithDetails("field", "Idempotency-Key")
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
