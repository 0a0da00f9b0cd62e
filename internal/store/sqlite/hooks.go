package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/clasp-dev/clasp/internal/store"
)

var _ store.HookForcer = (*Driver)(nil)

// HookForceIssueLocks is store.HookForcer: statement HookForceIssueLocks on
// the writer; a state that breaks the L7 CHECK is written with CHECK
// constraints ignored for that one statement.
func (d *Driver) HookForceIssueLocks(ctx context.Context, args store.Args) error {
	named := named(args, d.nowMicros())
	res, err := d.ws["HookForceIssueLocks"].ExecContext(ctx, named...)
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_CHECK {
		conn, err := d.w.Conn(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, `PRAGMA ignore_check_constraints = ON`); err != nil {
			return err
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), `PRAGMA ignore_check_constraints = OFF`)
		res, err = conn.ExecContext(ctx, d.sqlText["HookForceIssueLocks"], named...)
		if err != nil {
			return fmt.Errorf("test hook: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("test hook: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("test hook: %d rows changed, want 1: %w", n, sql.ErrNoRows)
	}
	return nil
}
