package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/clasp-dev/clasp/internal/store"
)

// migrations are the versioned schema files, NNN_name.sql with goose
// annotations; each runs in its own transaction and its version is
// recorded in goose_db_version (in the store's schema). There are no down
// migrations.
//
//go:embed migration/*.sql
var migrations embed.FS

// migrate applies the pending migrations while holding a session advisory
// lock (pg_advisory_lock, on a key derived from the schema) on one pool
// connection, so that replicas starting at the same time migrate one after
// the other: the first applies, the others wait (no polling), then find
// nothing to do. Under the lock it first creates the store's schema if one
// is named and missing. goose runs on a connection of its own (not the
// pool's, so a pool of one connection cannot starve it).
func (s *Driver) migrate(ctx context.Context) error {
	fsys, err := fs.Sub(migrations, "migration")
	if err != nil {
		return err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	defer conn.Release()
	// The lock may be held by another replica's migration for a while, and a
	// migration may take long: no statement timeout here (Options.StatementTimeout).
	if _, err := conn.Exec(ctx, `SET statement_timeout = 0`); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), `RESET statement_timeout`) }() // back to the connection's own setting; a failure leaves a connection without a timeout, not a wrong answer
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(`+sqlMigrationLock+`)`, s.schema); err != nil {
		return fmt.Errorf("take migration lock: %w", err)
	}
	defer func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(`+sqlMigrationLock+`)`, s.schema); err != nil {
			_ = conn.Conn().Close(context.WithoutCancel(ctx)) // ending the session releases the lock
		}
	}()
	if s.schema != "" {
		var exists bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, s.schema).Scan(&exists); err != nil {
			return fmt.Errorf("look up schema %s: %w", s.schema, err)
		}
		if !exists { // creating needs the CREATE privilege on the database; using an existing schema does not
			if _, err := conn.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{s.schema}.Sanitize()); err != nil {
				return fmt.Errorf("create schema %s: %w", s.schema, err)
			}
		}
	}
	gcfg := s.pool.Config().ConnConfig.Copy()
	delete(gcfg.RuntimeParams, "statement_timeout")
	db := stdlib.OpenDB(*gcfg)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys, goose.WithDisableGlobalRegistry(true), goose.WithSlog(s.log))
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if err := store.CheckNotNewer(ctx, p); err != nil {
		return err
	}
	results, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	for _, r := range results {
		s.log.Info("applied migration", "version", r.Source.Version, "file", r.Source.Path, "duration", r.Duration)
	}
	return nil
}

// sqlMigrationLock is the migration lock's key: a hash of the schema
// migrated (the named one, else the connection's current schema).
const sqlMigrationLock = `hashtextextended('clasp.migrate:' || coalesce(nullif($1::text, ''), current_schema(), ''), 0)`

// SchemaVersion returns the version of the newest migration applied to the
// database (1 for 001_init.sql).
func (s *Driver) SchemaVersion(ctx context.Context) (int64, error) {
	var v int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(max(version_id), 0) FROM goose_db_version WHERE is_applied`).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("schema version: %w", err)
	}
	return v, nil
}
