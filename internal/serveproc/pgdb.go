package serveproc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvTestPostgresURL names the variable CI sets to a PostgreSQL URL whose
// user may create databases (.ci/run).
const EnvTestPostgresURL = "CLASP_TEST_POSTGRES_URL"

// dbName is what CreateDatabase accepts as a name prefix.
var dbName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,39}$`)

// CreateDatabase creates a fresh database named prefix_<random hex> on the
// server of adminURL (a postgres:// URL whose user may CREATE DATABASE) and
// returns its URL (adminURL with the database name replaced) and drop,
// which drops it (WITH (FORCE): connections still open are ended; it
// needs PostgreSQL 13 or later). prefix is lower-case letters, digits and
// underscores, at most 40 characters.
func CreateDatabase(ctx context.Context, adminURL, prefix string) (dbURL string, drop func(context.Context) error, err error) {
	if !dbName.MatchString(prefix) {
		return "", nil, fmt.Errorf("serveproc: database prefix %q: want lower-case letters, digits and _", prefix)
	}
	u, err := url.Parse(adminURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", nil, fmt.Errorf("serveproc: %s is not a postgres:// URL", EnvTestPostgresURL)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := prefix + "_" + hex.EncodeToString(b[:])

	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", nil, fmt.Errorf("serveproc: connect to %s: %w", u.Redacted(), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", nil, fmt.Errorf("serveproc: create database %s: %w", name, err)
	}
	u.Path = "/" + name
	drop = func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			return fmt.Errorf("serveproc: drop database %s: %w", name, err)
		}
		defer conn.Close(context.WithoutCancel(ctx))
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("serveproc: drop database %s: %w", name, err)
		}
		return nil
	}
	return u.String(), drop, nil
}
