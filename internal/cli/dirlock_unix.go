//go:build unix

package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// LockFileName is the file under the data directory that `clasp serve`,
// `clasp migrate` and `clasp backup` hold a shared lock on (flock) while
// they use the SQLite database, and `clasp restore` an exclusive one. The
// kernel drops the lock when the process ends, however it ends, so a
// killed server leaves nothing stale behind.
const LockFileName = "clasp.db.lock"

// errDirLocked is wrapped by lockDataDir's error when another process holds
// a conflicting lock.
var errDirLocked = errors.New("data directory locked")

// lockDataDir takes the data directory's lock (LockFileName, created mode
// 0600 if missing), waiting up to lockSettle: shared for a user of the database,
// exclusive for a restore. It returns the function that releases it, or an
// error wrapping errDirLocked when another process holds a conflicting
// lock.
func lockDataDir(dir string, exclusive bool) (unlock func(), err error) {
	unlock, _, err = lockFile(filepath.Join(dir, LockFileName), exclusive, lockSettle)
	return unlock, err
}

// ServeLockFileName is the file under the data directory that `clasp
// serve` holds a lock on (flock) for as long as it runs, with its pid and
// store written in it: exclusive for a server of the SQLite database there
// (a second serve on the directory is refused: two servers on one SQLite
// file would not see each other's event streams, caches or managed runs),
// shared for PostgreSQL replicas (they may share a directory, but not with
// a SQLite server, whose board token file they would overwrite).
const ServeLockFileName = "clasp.serve.lock"

// lockServeDir takes the data directory's serve lock (ServeLockFileName)
// (waiting up to lockSettle), exclusive when sqlite, and writes this process's pid
// and store into it. It returns the release, or, when a conflicting serve
// holds it, an error wrapping errDirLocked that names that process.
func lockServeDir(dir string, sqlite bool) (unlock func(), err error) {
	path := filepath.Join(dir, ServeLockFileName)
	unlock, f, err := lockFile(path, sqlite, lockSettle)
	if errors.Is(err, errDirLocked) {
		holder := "another clasp serve"
		if b, rerr := os.ReadFile(path); rerr == nil && len(strings.TrimSpace(string(b))) > 0 { // #nosec G304 -- the lock file of the data directory
			holder += " (" + strings.TrimSpace(string(b)) + ")"
		}
		return nil, fmt.Errorf("%w: %s is using the data directory %s (it holds %s); stop it first, or give this server another --data-dir: "+
			"a data directory belongs to the one server of its SQLite database, or to the replicas of one PostgreSQL database (use --database-url for replicas)",
			errDirLocked, holder, dir, ServeLockFileName)
	}
	if err != nil {
		return nil, err
	}
	store := "PostgreSQL"
	if sqlite {
		store = "SQLite"
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(fmt.Sprintf("pid %d, %s\n", os.Getpid(), store)), 0) // only names the holder in another serve's error
	}
	return unlock, nil
}

// serveHolder returns what a running `clasp serve` wrote into the data
// directory's serve lock ("pid 1234, SQLite"), or "" when no serve holds
// that lock (or the file cannot be read). It only names a process for an
// error message: it takes the lock for a moment when it is free.
func serveHolder(dir string) string {
	path := filepath.Join(dir, ServeLockFileName)
	if _, err := os.Stat(path); err != nil {
		return "" // no serve ever ran here: create nothing
	}
	unlock, _, err := lockFile(path, true, 0)
	if err == nil {
		unlock()
		return ""
	}
	if !errors.Is(err, errDirLocked) {
		return ""
	}
	b, err := os.ReadFile(path) // #nosec G304 -- the serve lock file of the data directory
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// lockSettle is how long lockDataDir and lockServeDir try again before
// they call a data directory locked. A flock belongs to the open file, and
// a child process that any goroutine of this process is starting holds a
// copy of every descriptor from its fork until its exec closes it
// (close-on-exec), so for that moment a lock just released, by a serve
// stopped in this process, is still held. A real holder keeps it far
// longer.
const lockSettle = time.Second

// lockFile opens path (created mode 0600 if missing) and takes its flock:
// shared, or exclusive. While another holder keeps a conflicting lock it
// tries again every few milliseconds for up to settle (0: once). It
// returns the release (closing the file drops the lock) and the open
// file, or an error wrapping errDirLocked when the conflicting lock was
// still held after settle.
func lockFile(path string, exclusive bool, settle time.Duration) (unlock func(), f *os.File, err error) {
	f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600) // #nosec G304 -- a lock file of the data directory
	if err != nil {
		return nil, nil, fmt.Errorf("open the data directory's lock file: %w", err)
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	deadline := time.Now().Add(settle)
	for {
		err = syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB) // #nosec G115 -- a file descriptor fits an int
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || !time.Now().Before(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err != nil {
		_ = f.Close() // the lock error is the one returned
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, nil, fmt.Errorf("%w: %s", errDirLocked, path)
		}
		return nil, nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { _ = f.Close() }, f, nil
}
