// Package secret is the format of clasp's credentials (agent API keys, run
// tokens, the board token, operator tokens, board sessions) and the
// masking of them in text.
//
// A credential is "clasp_<kind>_<id>_<secret><check>": kind is ak (agent
// API key), rt (run token), bt (the board token of the first start, an
// admin operator token), ot (operator token), bs (board session, the
// secret a signed-in browser's cookie carries) or gt (gate token, read-only,
// for the git gate's check alone); id is 8 characters of
// lower-case base32 (a-z, 2-7) that name the credential in listings and
// logs without revealing it; secret is 256 random bits in unpadded
// base64url (43 characters); check is the CRC-32 (IEEE) of everything
// before it in 6 base62 characters. A mistyped or truncated credential
// fails Check without any lookup. Credentials of the earlier format,
// "clasp_<kind>_<secret>" with the same 43-character secret and no id or
// check, stay valid (Check reports them as Legacy).
package secret

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"regexp"
	"strings"
)

// Kinds of credentials.
const (
	AgentKey = "ak"
	RunToken = "rt"
	Board    = "bt"
	Operator = "ot"
	Session  = "bs"
	// Gate is a gate token: a company's read-only credential for the git
	// gate's check alone.
	Gate = "gt"
)

// Prefix starts every clasp credential.
const Prefix = "clasp_"

// Lengths of the parts of a credential.
const (
	idLen     = 8
	secretLen = 43 // 32 bytes, unpadded base64url
	checkLen  = 6
	headLen   = len(Prefix) + 3 // "clasp_ak_"
	// Len is the length of a credential of the current format.
	Len = headLen + idLen + 1 + secretLen + checkLen
	// LegacyLen is the length of a credential of the earlier format.
	LegacyLen = headLen + secretLen
	// IDPrefixLen is the length of "clasp_<kind>_<id>", the part of a
	// current-format credential that names it without revealing it.
	IDPrefixLen = headLen + idLen
)

const (
	base32Lower = "abcdefghijklmnopqrstuvwxyz234567"
	base62      = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)

// validKind reports whether k is a credential kind.
func validKind(k string) bool {
	return k == AgentKey || k == RunToken || k == Board || k == Operator || k == Session || k == Gate
}

// New returns a new credential of kind (AgentKey, RunToken or Board) in
// the current format. It panics on an unknown kind (a programming error).
func New(kind string) string {
	if !validKind(kind) {
		panic(fmt.Sprintf("secret.New: unknown credential kind %q", kind))
	}
	var id [idLen]byte
	var sec [32]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails (it crashes the program instead)
	_, _ = rand.Read(sec[:])
	for i := range id {
		id[i] = base32Lower[id[i]%32]
	}
	body := Prefix + kind + "_" + string(id[:]) + "_" + base64.RawURLEncoding.EncodeToString(sec[:])
	return body + check(body)
}

// Derived returns the credential of kind made from sum (32 bytes, e.g. an
// HMAC-SHA256): the same sum always gives the same credential, of the
// current format; its id is taken from the SHA-256 of sum. It panics on
// an unknown kind or a sum of another length (programming errors).
func Derived(kind string, sum []byte) string {
	if !validKind(kind) || len(sum) != 32 {
		panic(fmt.Sprintf("secret.Derived: kind %q, %d bytes", kind, len(sum)))
	}
	h := sha256.Sum256(sum)
	var id [idLen]byte
	for i := range id {
		id[i] = base32Lower[h[i]%32]
	}
	body := Prefix + kind + "_" + string(id[:]) + "_" + base64.RawURLEncoding.EncodeToString(sum)
	return body + check(body)
}

// check is the CRC-32 (IEEE) of body in checkLen base62 characters.
func check(body string) string {
	v := crc32.ChecksumIEEE([]byte(body))
	var b [checkLen]byte
	for i := checkLen - 1; i >= 0; i-- {
		b[i] = base62[v%62]
		v /= 62
	}
	return string(b[:])
}

// Hash is the hex SHA-256 of a credential: the only form the server
// stores.
func Hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Form is what Check found a string to be.
type Form int

const (
	// NotClasp: no clasp_<kind>_ prefix (not a clasp credential at all).
	NotClasp Form = iota
	// Malformed: a clasp_<kind>_ prefix but neither format, or a check
	// that does not match (a typo): no credential can be this.
	Malformed
	// Legacy: the earlier format, clasp_<kind>_<secret>.
	Legacy
	// Current: the current format with a matching check.
	Current
)

// Check tells which form token has, and its kind ("" for NotClasp). It
// reads nothing but the string.
func Check(token string) (kind string, form Form) {
	rest, ok := strings.CutPrefix(token, Prefix)
	if !ok || len(rest) < 3 || rest[2] != '_' || !validKind(rest[:2]) {
		return "", NotClasp
	}
	kind = rest[:2]
	switch len(token) {
	case LegacyLen:
		if inAlphabet(token[headLen:], isBase64URL) {
			return kind, Legacy
		}
	case Len:
		id, sec := token[headLen:headLen+idLen], token[headLen+idLen+1:Len-checkLen]
		if token[headLen+idLen] == '_' && inAlphabet(id, func(c byte) bool { return strings.IndexByte(base32Lower, c) >= 0 }) &&
			inAlphabet(sec, isBase64URL) && check(token[:Len-checkLen]) == token[Len-checkLen:] {
			return kind, Current
		}
	}
	return kind, Malformed
}

// ID is the naming part of a current-format credential,
// "clasp_<kind>_<id>"; for a legacy one, its first 12 characters (which
// name it as the earlier key prefixes did); "" otherwise.
func ID(token string) string {
	switch _, f := Check(token); f {
	case Current:
		return token[:IDPrefixLen]
	case Legacy:
		return token[:12]
	}
	return ""
}

func isBase64URL(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

func inAlphabet(s string, ok func(byte) bool) bool {
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			return false
		}
	}
	return true
}

// pattern matches anything that looks like a clasp credential, of any
// format and length (a masked log shows no part of the secret).
var pattern = regexp.MustCompile(`clasp_(ak|rt|bt|ot|bs)_[A-Za-z0-9_-]+`)

// MaskedSuffix replaces the secret part of a masked credential.
const MaskedSuffix = "[masked]"

// Mask returns s with every clasp credential in it replaced by
// "clasp_<kind>_[masked]", and every occurrence of each of values (known
// secrets of any format; empty ones are ignored) by "[masked]".
func Mask(s string, values ...string) string {
	return string(MaskBytes([]byte(s), values...))
}

// MaskBytes is Mask on bytes; it returns b itself when there is nothing to
// mask.
func MaskBytes(b []byte, values ...string) []byte {
	if bytes.Contains(b, []byte(Prefix)) {
		b = pattern.ReplaceAll(b, []byte("clasp_${1}_"+MaskedSuffix))
	}
	for _, v := range values {
		if v != "" && bytes.Contains(b, []byte(v)) {
			b = bytes.ReplaceAll(b, []byte(v), []byte(MaskedSuffix))
		}
	}
	return b
}

// Pending returns how many bytes at the end of b may be the start of a
// credential that more bytes would complete (a credential still being
// written, or a proper prefix of one of values): a streaming masker holds
// them back until more input arrives or the stream ends. Credentials that
// already run longer than maxHold bytes are not held (they are masked as
// they are).
func Pending(b []byte, maxHold int, values ...string) int {
	hold := 0
	// A credential match reaching the end of b may continue.
	if i := bytes.LastIndex(b, []byte(Prefix)); i >= 0 {
		tail := b[i:]
		if loc := pattern.FindIndex(tail); loc != nil && loc[0] == 0 && loc[1] == len(tail) && len(tail) <= maxHold {
			hold = len(tail)
		}
	}
	// "clasp_xx_" or a prefix of it, or a proper prefix of a value, at
	// the very end.
	for i, v := range append([]string{Prefix + AgentKey + "_", Prefix + RunToken + "_", Prefix + Board + "_", Prefix + Operator + "_", Prefix + Session + "_", Prefix + Gate + "_"}, values...) {
		longest := len(v) - 1
		if i < 5 { // the five credential heads
			longest = len(v)
		}
		for n := min(longest, len(b)); n > hold; n-- {
			if bytes.HasSuffix(b, []byte(v[:n])) {
				hold = n
				break
			}
		}
	}
	return hold
}
