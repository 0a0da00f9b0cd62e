package postgres

import (
	"time"

	"github.com/clasp-dev/clasp/internal/store"
)

// nullable is s, or nil (SQL NULL) when s is empty.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// The shared helpers live in package store (ref.go, cursor.go, scope.go); these names keep
// the statements' call sites short.

func splitRef(ref string) (id, ident string)             { return store.SplitRef(ref) }
func pageLimit(n int) int                                { return store.PageLimit(n) }
func scope(a store.Actor) string                         { return store.Scope(a) }
func encodeCursor(createdAt time.Time, id string) string { return store.EncodeCursor(createdAt, id) }

// actorArgs adds store.ActorArgs, the named arguments of an activity
// row's actor, to args.
func actorArgs(args namedArgs, a store.Actor) namedArgs {
	return namedArgs(store.ActorArgs(store.Args(args), a))
}
