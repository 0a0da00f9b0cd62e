package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/clasp-dev/clasp/internal/store"
)

const (
	// idempotencyWindow is how long a stored answer is replayed (SPEC section 3).
	idempotencyWindow = 24 * time.Hour
	// idempotencyAbandoned is when a reservation whose request never
	// completed (the server died mid-request) may be taken again: far
	// longer than any request may take.
	idempotencyAbandoned = 10 * time.Minute
	// idempotencyPurgeEvery spaces the deletions of expired records.
	idempotencyPurgeEvery = time.Hour
)

const (
	// sqlIdempotencyReserve takes (actor, key) unless a record of it is
	// still in force: one answered within the window, or one in flight and
	// not abandoned. It returns a row only when it took the reservation.
	sqlIdempotencyReserve = `INSERT INTO idempotency_keys (actor_id, key, request_hash, status_code, body, created_at)
	VALUES (:actor, :key, :hash, 0, NULL, :now)
	ON CONFLICT (actor_id, key) DO UPDATE SET
		request_hash = excluded.request_hash, status_code = 0, body = NULL, created_at = excluded.created_at
	WHERE idempotency_keys.created_at <= :now - :window
		OR (idempotency_keys.status_code = 0 AND idempotency_keys.created_at <= :now - :abandoned)
	RETURNING 1`
	sqlIdempotencyGet      = `SELECT request_hash, status_code, body FROM idempotency_keys WHERE actor_id = ? AND key = ?`
	sqlIdempotencyComplete = `UPDATE idempotency_keys SET status_code = ?, body = ? WHERE actor_id = ? AND key = ?`
	sqlIdempotencyAbort    = `DELETE FROM idempotency_keys WHERE actor_id = ? AND key = ? AND status_code = 0`
	sqlIdempotencyPurge    = `DELETE FROM idempotency_keys WHERE created_at <= ?`
)

// IdempotencyBegin reserves (actorID, key) for a request whose body hashes
// to requestHash. It returns nil, nil when the reservation is new (the
// caller then calls IdempotencyComplete or IdempotencyAbort); otherwise the
// record in force (StatusCode 0 while the first request is in flight; the
// caller compares RequestHash). Records older than 24 hours, and
// reservations in flight for more than 10 minutes, are replaced.
func (s *Store) IdempotencyBegin(ctx context.Context, actorID, key, requestHash string) (*store.IdempotencyRecord, error) {
	var rec *store.IdempotencyRecord
	err := s.write(ctx, func(tx *wtx) error {
		if last := s.idemSweptAt.Load(); tx.now-last >= idempotencyPurgeEvery.Microseconds() && s.idemSweptAt.CompareAndSwap(last, tx.now) {
			if _, err := tx.exec(ctx, qIdempotencyPurge, tx.now-idempotencyWindow.Microseconds()); err != nil {
				return fmt.Errorf("purge idempotency records: %w", err)
			}
		}
		var one int
		err := tx.queryRow(ctx, qIdempotencyReserve, sql.Named("actor", actorID), sql.Named("key", key),
			sql.Named("hash", requestHash), sql.Named("now", tx.now), sql.Named("window", idempotencyWindow.Microseconds()),
			sql.Named("abandoned", idempotencyAbandoned.Microseconds())).Scan(&one)
		if err == nil {
			return nil // reserved
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("reserve idempotency key: %w", err)
		}
		rec = &store.IdempotencyRecord{}
		err = tx.queryRow(ctx, qIdempotencyGet, actorID, key).Scan(&rec.RequestHash, &rec.StatusCode, &rec.Body)
		return wrap(err, "read idempotency record")
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// IdempotencyComplete stores the answer (status and body) to a reserved request.
func (s *Store) IdempotencyComplete(ctx context.Context, actorID, key string, status int, body []byte) error {
	return s.write(ctx, func(tx *wtx) error {
		_, err := tx.exec(ctx, qIdempotencyComplete, status, body, actorID, key)
		return wrap(err, "complete idempotency record")
	})
}

// IdempotencyAbort drops a reservation still in flight, so a retry may run.
func (s *Store) IdempotencyAbort(ctx context.Context, actorID, key string) error {
	return s.write(ctx, func(tx *wtx) error {
		_, err := tx.exec(ctx, qIdempotencyAbort, actorID, key)
		return wrap(err, "abort idempotency record")
	})
}
