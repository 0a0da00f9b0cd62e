package store

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/clasp-dev/clasp"
)

// Page sizes and keyset cursors every store shares: a cursor is opaque to
// callers and the same on every store, so a client pages through any of
// them the same way.

// PageLimit clamps a list's page size (its limit parameter) to 1..1000;
// 0 or less takes the default, 100.
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

// TrimPage cuts a page read with limit+1 rows (the extra row says a next
// page exists) to limit rows, and returns the cursor of the next page
// (cursorOf of its last row), "" on the last page.
func TrimPage[T any](list []*T, limit int, cursorOf func(*T) string) ([]*T, string) {
	if len(list) <= limit {
		return list, ""
	}
	list = list[:limit]
	return list, cursorOf(list[limit-1])
}
