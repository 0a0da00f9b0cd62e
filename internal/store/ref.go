package store

import (
	"strings"
	"unicode/utf8"
)

// SplitRef turns an issue reference, its UUID or its identifier
// (case-insensitive), into the two lookup keys a statement takes; the one
// that does not apply is "" and matches nothing.
func SplitRef(ref string) (id, ident string) {
	if IsUUID(ref) {
		return strings.ToLower(ref), ""
	}
	if !utf8.ValidString(ref) || strings.ContainsRune(ref, 0) {
		// No identifier holds these, and PostgreSQL refuses them in text
		// parameters (SQLSTATE 22021: /api/issues/%00 would answer 500
		// instead of 404).
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
