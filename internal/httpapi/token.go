package httpapi

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

// Token kinds for NewToken (SPEC section 2): an agent API key, a run token,
// the board token.
const (
	TokenAgentKey = "ak"
	TokenRun      = "rt"
	TokenBoard    = "bt"
)

// tokenPrefix is the start every clasp token shares: clasp_<kind>_.
const tokenPrefix = "clasp_"

// KeyPrefixLen is how many leading characters of an agent key are kept, in
// clear, as the key's display prefix (e.g. "clasp_ak_3fZ").
const KeyPrefixLen = 12

// NewToken returns a new secret of the given kind ("ak", "rt" or "bt"),
// "clasp_<kind>_" followed by 256 random bits in unpadded base64url, and
// its hash as stored by the server (HashToken). It panics on an unknown kind
// (a programming error) and if the system's random source fails.
func NewToken(kind string) (token, hash string) {
	switch kind {
	case TokenAgentKey, TokenRun, TokenBoard:
	default:
		panic(fmt.Sprintf("httpapi.NewToken: unknown token kind %q", kind))
	}
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it crashes the program instead)
	token = tokenPrefix + kind + "_" + base64.RawURLEncoding.EncodeToString(b[:])
	return token, HashToken(token)
}

// runTokenFor returns the run token of run runID opened with an
// Idempotency-Key under agent API key apiKey: "clasp_rt_" and the unpadded
// base64url HMAC-SHA256, keyed by the API key (256 random bits), of a
// fixed label and the run id. The same key and run always give the same
// token, so a replayed open answers the token of the first answer and that
// one stays valid; without the API key it cannot be computed, and whoever
// holds the key may act in the agent's runs anyway.
func runTokenFor(apiKey, runID string) string {
	m := hmac.New(sha256.New, []byte(apiKey))
	m.Write([]byte("clasp idempotent run token\x00" + runID))
	return tokenPrefix + TokenRun + "_" + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// HashToken returns the hex SHA-256 of token: the only form in which the
// server stores agent keys, run tokens and the board token (setting
// "board_token_hash").
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// tokenKind returns the kind of a clasp token ("ak", "rt", "bt"), or "" if
// token does not look like one.
func tokenKind(token string) string {
	rest, ok := strings.CutPrefix(token, tokenPrefix)
	if !ok || len(rest) < 4 || rest[2] != '_' {
		return ""
	}
	switch k := rest[:2]; k {
	case TokenAgentKey, TokenRun, TokenBoard:
		return k
	}
	return ""
}

// hashEqual compares two hex hashes in constant time.
func hashEqual(a, b string) bool {
	return len(a) == len(b) && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
