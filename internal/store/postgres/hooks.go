package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/clasp-dev/clasp/internal/store"
)

var _ store.HookForcer = (*Driver)(nil)

// HookForceIssueLocks is store.HookForcer: statement HookForceIssueLocks;
// a state that breaks the L7 CHECK is written in a transaction that drops
// the CHECK, writes, and adds it back NOT VALID (checked for every later
// write, not for the rows already there): fine for a test's own schema,
// never for a shared one.
func (d *Driver) HookForceIssueLocks(ctx context.Context, args store.Args) error {
	n, err := pooled{d.pool}.Exec(ctx, "HookForceIssueLocks", args)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23514" {
		return d.hookForceUnchecked(ctx, args)
	}
	if err == nil && n != 1 {
		err = fmt.Errorf("%d rows changed, want 1: %w", n, pgx.ErrNoRows)
	}
	return wrap(err, "test hook")
}

// hookForceUnchecked runs statement HookForceIssueLocks with the L7 CHECK
// dropped, in a transaction of its own.
func (d *Driver) hookForceUnchecked(ctx context.Context, args store.Args) error {
	return pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		for _, name := range []string{"HookDropL7", "HookForceIssueLocks", "HookAddL7"} {
			if _, err := (pooled{tx}).Exec(ctx, name, args); err != nil {
				return fmt.Errorf("test hook %s: %w", name, err)
			}
		}
		return nil
	})
}
