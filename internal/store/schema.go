package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/pressly/goose/v3"
)

// ErrNewerSchema is wrapped by the error of opening (or restoring) a
// database whose schema version is above the newest migration the binary
// embeds: a newer clasp upgraded it, and this one would read and write
// tables it does not know the rules of.
var ErrNewerSchema = errors.New("the database was written by a newer clasp")

// CheckNotNewer compares the database's schema version with the newest
// migration of p (both stores migrate with goose). It returns nil when the
// database is at that version or older (a fresh database is version 0),
// an error wrapping ErrNewerSchema that says what to do when it is newer,
// and the driver's error when the version cannot be read.
func CheckNotNewer(ctx context.Context, p *goose.Provider) error {
	db, err := p.GetDBVersion(ctx)
	if err != nil {
		return fmt.Errorf("schema version: %w", err)
	}
	var latest int64
	for _, s := range p.ListSources() {
		latest = max(latest, s.Version)
	}
	if db > latest {
		return fmt.Errorf("%w: its schema version is %d and this clasp knows versions up to %d; run the clasp version that upgraded it (or a newer one), or restore a backup taken before the upgrade", ErrNewerSchema, db, latest)
	}
	return nil
}
