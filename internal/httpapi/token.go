package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"

	"github.com/clasp-dev/clasp/internal/secret"
)

// Token kinds for NewToken (RULES.md, Actors and credentials): an agent API key, a run token,
// the board token (the first admin operator token), an operator token, a
// board session.
const (
	TokenAgentKey = secret.AgentKey
	TokenRun      = secret.RunToken
	TokenBoard    = secret.Board
	TokenOperator = secret.Operator
	TokenSession  = secret.Session
	TokenGate     = secret.Gate
)

// KeyPrefixLen is how many leading characters of an agent key are kept, in
// clear, as the key's display prefix: "clasp_ak_<id>", the part of the
// key that names it without revealing it (package secret).
const KeyPrefixLen = secret.IDPrefixLen

// NewToken returns a new secret of the given kind ("ak", "rt" or "bt") in
// the format of package secret ("clasp_<kind>_<id>_<secret><check>") and
// its hash as stored by the server (HashToken). It panics on an unknown
// kind (a programming error).
func NewToken(kind string) (token, hash string) {
	token = secret.New(kind)
	return token, HashToken(token)
}

// runTokenFor returns the run token of run runID opened with an
// Idempotency-Key under agent API key apiKey: a run token of the current
// format (package secret) whose id and secret are the HMAC-SHA256, keyed
// by the API key, of a fixed label and the run id. The same key and run
// always give the same token, so a replayed open answers the token of the
// first answer and that one stays valid; without the API key it cannot be
// computed, and whoever holds the key may act in the agent's runs anyway.
func runTokenFor(apiKey, runID string) string {
	m := hmac.New(sha256.New, []byte(apiKey))
	m.Write([]byte("clasp idempotent run token\x00" + runID))
	return secret.Derived(secret.RunToken, m.Sum(nil))
}

// HashToken returns the hex SHA-256 of token: the only form in which the
// server stores agent keys, run tokens and the board token (setting
// "board_token_hash").
func HashToken(token string) string { return secret.Hash(token) }

// tokenKind returns the kind of a clasp token ("ak", "rt", "bt") and
// whether it can be one: false for a string with a clasp_<kind>_ prefix
// that is neither format or fails its checksum (a typo), which no lookup
// can match. kind is "" (and ok true) for tokens without a clasp prefix.
func tokenKind(token string) (kind string, ok bool) {
	kind, form := secret.Check(token)
	return kind, form != secret.Malformed
}

// hashEqual compares two hex hashes in constant time.
func hashEqual(a, b string) bool {
	return len(a) == len(b) && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
