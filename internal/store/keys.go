package store

import (
	"encoding/base64"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/clasp-dev/clasp"
)

// Helpers every store shares: issue references, page sizes, keyset
// cursors (opaque to callers and the same on every store, so a client can
// page through any of them the same way) and the actor's tenant scope.

// SplitRef turns an issue reference, its UUID or its identifier
// (case-insensitive), into the two lookup keys a statement takes; the one
// that does not apply is "" and matches nothing.
func SplitRef(ref string) (id, ident string) {
	if IsUUID(ref) {
		return strings.ToLower(ref), ""
	}
	if !utf8.ValidString(ref) || strings.ContainsRune(ref, 0) {
		// No identifier holds these, and PostgreSQL refuses them in text
		// parameters (SQLSTATE 22021, a 500 the fresh-eyes tester found
		// with /api/issues/%00).
		return "", ""
	}
	return "", strings.ToUpper(strings.TrimSpace(ref))
}

// IsUUID reports whether s has the 8-4-4-4-12 hex form of a UUID.
func IsUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// PageLimit clamps a page size to 1..1000 (default 100, SPEC section 3).
func PageLimit(n int) int {
	switch {
	case n <= 0:
		return 100
	case n > 1000:
		return 1000
	}
	return n
}

// EncodeCursor is the keyset cursor of lists ordered by (created_at, id):
// base64url of "createdAtµs.id".
func EncodeCursor(createdAt time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(createdAt.UnixMicro(), 10) + "." + id))
}

// DecodeCursor reverses EncodeCursor; 400 invalid_request (field cursor)
// for anything else.
func DecodeCursor(c string) (createdAt time.Time, id string, err error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		ts, rest, ok := strings.Cut(string(b), ".")
		us, err := strconv.ParseInt(ts, 10, 64)
		if ok && err == nil && rest != "" {
			return time.UnixMicro(us).UTC(), rest, nil
		}
	}
	return time.Time{}, "", badCursor()
}

// EncodeIDCursor is the keyset cursor of activity lists: base64url of the id.
func EncodeIDCursor(id int64) string {
	return base64.RawURLEncoding.EncodeToString(strconv.AppendInt(nil, id, 10))
}

// DecodeIDCursor reverses EncodeIDCursor; 400 invalid_request (field
// cursor) for anything else.
func DecodeIDCursor(c string) (int64, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		if id, err := strconv.ParseInt(string(b), 10, 64); err == nil && id > 0 {
			return id, nil
		}
	}
	return 0, badCursor()
}

func badCursor() error {
	return clasp.InvalidField("cursor", "The cursor is not one this server handed out; start again without it.")
}

// Scope is the company an actor is confined to: an agent's own company, ""
// (no restriction) for the board and the system (SPEC section 2).
func Scope(a Actor) string {
	if a.Type == clasp.ActorAgent {
		return a.CompanyID
	}
	return ""
}

// Broadcast fans "activity may have been committed" out to the channels of
// store.ActivityStream.WatchActivity; both stores embed one.
type Broadcast struct {
	mu  sync.Mutex
	chs map[chan struct{}]struct{}
}

// Notify wakes every watcher without blocking: each channel holds at most
// one pending value, and a pending value already says "look again".
func (b *Broadcast) Notify() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.chs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Watch implements ActivityStream.WatchActivity on b: the returned channel
// receives a value after each Notify (coalesced) and is closed when done
// is closed.
func (b *Broadcast) Watch(done <-chan struct{}) <-chan struct{} {
	ch := make(chan struct{}, 1)
	b.mu.Lock()
	if b.chs == nil {
		b.chs = map[chan struct{}]struct{}{}
	}
	b.chs[ch] = struct{}{}
	b.mu.Unlock()
	out := make(chan struct{})
	go func() {
		defer close(out)
		defer func() {
			b.mu.Lock()
			delete(b.chs, ch)
			b.mu.Unlock()
		}()
		for {
			select {
			case <-done:
				return
			case <-ch:
				select {
				case out <- struct{}{}:
				case <-done:
					return
				}
			}
		}
	}()
	return out
}
