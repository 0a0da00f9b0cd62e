//go:build unix

package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
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
// 0600 if missing) without waiting: shared for a user of the database,
// exclusive for a restore. It returns the function that releases it, or an
// error wrapping errDirLocked when another process holds a conflicting
// lock.
func lockDataDir(dir string, exclusive bool) (unlock func(), err error) {
	path := filepath.Join(dir, LockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600) // #nosec G304 -- the lock file of the data directory
	if err != nil {
		return nil, fmt.Errorf("open the data directory's lock file: %w", err)
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	for {
		err = syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB) // #nosec G115 -- a file descriptor fits an int
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		_ = f.Close() // the lock error is the one returned
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", errDirLocked, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil // closing the file drops the lock
}
