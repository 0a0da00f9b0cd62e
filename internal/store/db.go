package store

import (
	"context"

	"github.com/clasp-dev/clasp"
)

// DB is the one implementation of Store and HeartbeatStore: every rule,
// validation, retry, refusal and audit decision, written once, running its
// statements on a dialect's Driver. Safe for concurrent use; Close it when
// done (which closes the driver).
type DB struct {
	CRUD      // companies, agents, issues, comments, tokens, webhooks, lists
	Heartbeat // server-managed agents: wakes, managed runs, instances
	*Locks    // the checkout and release rules and PATCH
	Runs      // a run's end, the sweeper's passes, run lists and authentication
	*Claims   // claim-next

	d Driver
}

var (
	_ Store          = (*DB)(nil)
	_ HeartbeatStore = (*DB)(nil)
)

// New returns the store running on driver d. The driver is the caller's
// (internal/store/sqlite.Open, internal/store/postgres.Open) and belongs
// to the store from now on: DB.Close closes it.
func New(d Driver) *DB {
	c := NewCRUD(d)
	return &DB{CRUD: c, Heartbeat: NewHeartbeat(d), Locks: NewLocks(d, c), Runs: NewRuns(d, c), Claims: NewClaims(d), d: d}
}

// Driver returns the driver the store runs on (for tools and tests that
// reach the dialect: a backup, a raw benchmark, test hooks).
func (db *DB) Driver() Driver { return db.d }

// Close closes the driver's connections.
func (db *DB) Close() error { return db.d.Close() }

// Ping checks that the database answers (Driver.Ping).
func (db *DB) Ping(ctx context.Context) error { return db.d.Ping(ctx) }

// SchemaVersion returns the database's schema version (Driver.SchemaVersion).
func (db *DB) SchemaVersion(ctx context.Context) (int64, error) { return db.d.SchemaVersion(ctx) }

// ActivityAfter is ActivityStream.ActivityAfter, on the driver.
func (db *DB) ActivityAfter(ctx context.Context, companyID string, afterID int64, limit int) ([]*clasp.Activity, int64, error) {
	return db.d.ActivityAfter(ctx, companyID, afterID, limit)
}

// ActivityLatestID is ActivityStream.ActivityLatestID, on the driver.
func (db *DB) ActivityLatestID(ctx context.Context, companyID string) (int64, error) {
	return db.d.ActivityLatestID(ctx, companyID)
}

// WatchActivity is ActivityStream.WatchActivity, on the driver.
func (db *DB) WatchActivity(ctx context.Context) <-chan struct{} { return db.d.WatchActivity(ctx) }
