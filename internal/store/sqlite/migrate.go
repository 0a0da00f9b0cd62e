package sqlite

import (
	"context"
	"embed"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"

	"github.com/clasp-dev/clasp/internal/store"
)

// migrations are the versioned schema files, NNN_name.sql with goose
// annotations; each runs in its own transaction and its version is
// recorded in goose_db_version. There are no down migrations.
//
//go:embed migration/*.sql
var migrations embed.FS

// migrate applies the pending migrations on the writer connection.
//
// Two processes opening the same new file at the same instant may both try
// to apply version 1; the second then fails on "table already exists" and
// can simply be restarted. Goose has no lock for SQLite, and within one
// process the single writer connection serialises everything.
func (s *Driver) migrate(ctx context.Context) error {
	fsys, err := fs.Sub(migrations, "migration")
	if err != nil {
		return err
	}
	s.migrator, err = goose.NewProvider(goose.DialectSQLite3, s.w, fsys,
		goose.WithDisableGlobalRegistry(true), goose.WithSlog(s.log))
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if err := store.CheckNotNewer(ctx, s.migrator); err != nil {
		return err
	}
	results, err := s.migrator.Up(ctx)
	if err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	for _, r := range results {
		s.log.Info("applied migration", "version", r.Source.Version, "file", r.Source.Path, "duration", r.Duration)
	}
	return nil
}

// SchemaVersion returns the version of the newest migration applied to the
// database (1 for 001_init.sql).
func (s *Driver) SchemaVersion(ctx context.Context) (int64, error) {
	v, err := s.migrator.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("schema version: %w", err)
	}
	return v, nil
}
