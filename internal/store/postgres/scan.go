package postgres

import (
	"time"

	"github.com/clasp-dev/clasp"
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

// The shared helpers live in package store (keys.go); these names keep
// the statements' call sites short.

func splitRef(ref string) (id, ident string)             { return store.SplitRef(ref) }
func pageLimit(n int) int                                { return store.PageLimit(n) }
func encodeIDCursor(id int64) string                     { return store.EncodeIDCursor(id) }
func scope(a store.Actor) string                         { return store.Scope(a) }
func encodeCursor(createdAt time.Time, id string) string { return store.EncodeCursor(createdAt, id) }

// actorArgs are the named arguments of an activity row's actor:
// @actor_type (agent, board or system), @actor_id and @actor_run (NULL
// when the actor acts in no run).
func actorArgs(args namedArgs, a store.Actor) namedArgs {
	t := a.Type
	if t != clasp.ActorAgent && t != clasp.ActorBoard {
		t = clasp.ActorSystem
	}
	args["actor_type"] = string(t)
	args["actor_id"] = a.ID()
	args["actor_run"] = nullable(a.RunID)
	args["actor_request"] = nullable(a.RequestID)
	return args
}
