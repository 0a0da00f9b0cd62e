package store

import (
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
