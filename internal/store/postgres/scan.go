package postgres

import (
	"github.com/clasp-dev/clasp/internal/store"
)

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
