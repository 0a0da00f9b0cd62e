package sqlite

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

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
	var err error
	s.migrator, err = goose.NewProvider(goose.DialectSQLite3, s.w, Migrations(),
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

// LatestSchemaVersion is the version of the newest migration this binary
// embeds: a database whose schema version is higher was written by a newer
// clasp, which this one must not open (Inspect reports it).
func LatestSchemaVersion() int64 {
	entries, err := fs.ReadDir(migrations, "migration")
	if err != nil {
		panic(fmt.Sprintf("embedded migrations: %v", err)) // the embed is part of the binary
	}
	var latest int64
	for _, e := range entries {
		n, _, _ := strings.Cut(e.Name(), "_")
		if v, err := strconv.ParseInt(n, 10, 64); err == nil && v > latest {
			latest = v
		}
	}
	return latest
}

// Migrations returns the embedded migrations, one goose SQL file each (for
// a tool or test that builds a database at an older schema version).
func Migrations() fs.FS {
	fsys, err := fs.Sub(migrations, "migration")
	if err != nil {
		panic(fmt.Sprintf("embedded migrations: %v", err)) // the embed is part of the binary
	}
	return fsys
}
