//go:build !unix

package cli

import "errors"

// LockFileName is the data directory's lock file on unix; elsewhere no lock
// is taken.
const LockFileName = "clasp.db.lock"

var errDirLocked = errors.New("data directory locked")

// lockDataDir takes no lock where flock is missing: `clasp restore` cannot
// tell a running server there, beyond SQLite's own busy answer.
func lockDataDir(dir string, exclusive bool) (unlock func(), err error) { return func() {}, nil }

// ServeLockFileName is the serve lock's file on unix; elsewhere no lock is
// taken.
const ServeLockFileName = "clasp.serve.lock"

// lockServeDir takes no lock where flock is missing: a second serve on the
// same data directory is not refused there.
func lockServeDir(dir string, sqlite bool) (unlock func(), err error) { return func() {}, nil }

// serveHolder names no process where flock is missing.
func serveHolder(dir string) string { return "" }
