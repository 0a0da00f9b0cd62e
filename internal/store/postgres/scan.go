package postgres

import (
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

// actorArgs adds store.ActorArgs, the named arguments of an activity
// row's actor, to args.
func actorArgs(args namedArgs, a store.Actor) namedArgs {
	return namedArgs(store.ActorArgs(store.Args(args), a))
}
