package store

import (
	"context"
	"fmt"
	"time"

	"github.com/clasp-dev/clasp"
)

// IdempotencyPurgeEvery spaces a process's deletions of expired
// idempotency records.
const IdempotencyPurgeEvery = time.Hour

// Kinds of resource an idempotency record names (column resource_type).
const (
	IdemIssue   = "issue"
	IdemComment = "comment"
	IdemRun     = "run"
	// IdemIssueUpdate names an issue a PATCH updated (IssueUpdate).
	IdemIssueUpdate = "issue_update"
)

// Start begins the lookup of an Idempotency-Key: it clears p.Replayed and
// reports whether there is a key to look up (false for p == nil). 400
// invalid_request for an empty actor or key.
func (p *IdempotencyParams) Start() (bool, error) {
	if p == nil {
		return false, nil
	}
	p.Replayed = false
	if p.ActorID == "" || p.Key == "" {
		return false, clasp.InvalidField("Idempotency-Key", "An Idempotency-Key needs a key and an actor.")
	}
	return true, nil
}

// Match checks the record found for p's key: nil when it is of the same
// request (hash) and of the resource kind wanted, else 422
// idempotency_key_reused (details.field Idempotency-Key).
func (p *IdempotencyParams) Match(hash, kind, want string) error {
	if hash != p.RequestHash || kind != want {
		return clasp.Errorf(clasp.CodeIdempotencyKeyReused,
			"This Idempotency-Key was used for a different request in the last 24 hours; use a new key.").
			WithDetails("field", "Idempotency-Key")
	}
	return nil
}

// idempotencyRecorder is implemented by the write Querier of a dialect
// whose creating statements do not record their Idempotency-Key
// (SQLite, whose statements write one table each): the shared code calls
// RecordIdempotency after the creation, in the same write, to record
// that p's (actor, key) created resource id of kind (p == nil records
// nothing). A write Querier without it (PostgreSQL) records the key in
// the creating statement itself (a CTE fed by IdemArgs), so that the
// creation and its record commit together and a concurrent duplicate
// fails that statement with a unique violation, creating nothing.
type idempotencyRecorder interface {
	RecordIdempotency(ctx context.Context, p *IdempotencyParams, kind, id string) error
}

// recordIdempotency records through q, when q records keys itself
// (idempotencyRecorder), that p's key created resource id of kind;
// otherwise the creating statement recorded it and this does nothing.
func recordIdempotency(ctx context.Context, q Querier, p *IdempotencyParams, kind, id string) error {
	if r, ok := q.(idempotencyRecorder); ok {
		return r.RecordIdempotency(ctx, p, kind, id)
	}
	return nil
}

// IdemArgs adds to args the named arguments of the record of p's
// Idempotency-Key that a creating statement writes itself where the
// write Querier is no idempotencyRecorder (PostgreSQL's CTE rec):
// idem_type (kind), idem_actor, idem_key and idem_hash (all three nil,
// NULL, when p is nil: no record). Other dialects ignore them.
func IdemArgs(args Args, p *IdempotencyParams, kind string) Args {
	args["idem_type"] = kind
	args["idem_actor"], args["idem_key"], args["idem_hash"] = nil, nil, nil
	if p != nil {
		args["idem_actor"], args["idem_key"], args["idem_hash"] = p.ActorID, p.Key, p.RequestHash
	}
	return args
}

// IdempotencyLookup is the first step of a creating call with an
// Idempotency-Key, through the write Querier q of the call's write (the
// creating calls of package store and of the dialects): it returns the id
// of the resource of kind recorded for p's (actor, key) within
// IdempotencyWindow (statement IdempotencyGet: request_hash,
// resource_type, resource_id), or "" when there is none (the caller
// creates, and records the key in the same write). At most once per
// IdempotencyPurgeEvery in this process it first deletes every expired
// record (IdempotencyPurge). 422 idempotency_key_reused if the record is
// of another request (hash) or another kind of resource; 400
// invalid_request for an empty actor or key; other errors are the
// driver's, untranslated. p == nil returns "".
func (c CRUD) IdempotencyLookup(ctx context.Context, q Querier, p *IdempotencyParams, kind string) (string, error) {
	if ok, err := p.Start(); !ok {
		return "", err
	}
	window := IdempotencyWindow.Microseconds()
	if last := c.idemPurgedAt.Load(); time.Since(time.Unix(0, last)) >= IdempotencyPurgeEvery &&
		c.idemPurgedAt.CompareAndSwap(last, time.Now().UnixNano()) {
		if _, err := q.Exec(ctx, "IdempotencyPurge", Args{"window": window}); err != nil {
			return "", fmt.Errorf("purge idempotency records: %w", err)
		}
	}
	var hash, gotKind, id string
	err := q.QueryRow(ctx, "IdempotencyGet", Args{"actor": p.ActorID, "key": p.Key, "window": window}).Scan(&hash, &gotKind, &id)
	switch {
	case c.d.NoRows(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("read idempotency record: %w", err)
	}
	if err := p.Match(hash, gotKind, kind); err != nil {
		return "", err
	}
	return id, nil
}

// idempotent runs a creating call with an optional Idempotency-Key p as
// one write (write: the Driver's Write, or WriteTx for one transaction on
// every dialect): it looks the key up (IdempotencyLookup) and answers a
// recorded resource with replay(q, id), setting p.Replayed; else create(q)
// creates the resource of kind and the write records the key for idOf of
// it (recordIdempotency). When create fails with a unique violation, a
// concurrent duplicate may have recorded the key first, and create's
// write, with its record, wrote nothing: a new write looks the key up
// again and replays that record, or returns create's error when there is
// none. That happens on PostgreSQL, whose record is written by the
// creating statement; SQLite's single writer never meets it. Errors:
// IdempotencyLookup's, create's and replay's, translated.
func idempotent[T any](ctx context.Context, c CRUD, write func(context.Context, func(Querier) error) error,
	p *IdempotencyParams, kind string, idOf func(T) string,
	create func(q Querier) (T, error), replay func(q Querier, id string) (T, error)) (T, error) {
	var out T
	replayed := func(q Querier) (bool, error) {
		id, err := c.IdempotencyLookup(ctx, q, p, kind)
		if err != nil || id == "" {
			return false, err
		}
		v, err := replay(q, id)
		if err != nil {
			return false, err
		}
		out, p.Replayed = v, true
		return true, nil
	}
	dup := false
	err := write(ctx, func(q Querier) error {
		if ok, err := replayed(q); ok || err != nil {
			return err
		}
		v, err := create(q)
		if err != nil {
			dup = p != nil && c.d.Unique(err)
			return err
		}
		out = v
		return recordIdempotency(ctx, q, p, kind, idOf(v))
	})
	if dup {
		var ok bool
		if rerr := writeQuiet(c.d)(ctx, func(q Querier) (err error) { ok, err = replayed(q); return err }); rerr != nil || ok {
			err = rerr
		}
	}
	if err != nil {
		var zero T
		return zero, err
	}
	return out, nil
}
