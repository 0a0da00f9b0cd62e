package postgres

import (
	"github.com/clasp-dev/clasp/internal/store"
)

// idemArgs adds store.IdemArgs, the arguments of a statement's CTE rec
// (the record of an Idempotency-Key), to args.
func idemArgs(args namedArgs, p *store.IdempotencyParams, kind string) namedArgs {
	return namedArgs(store.IdemArgs(store.Args(args), p, kind))
}
