package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/clasp-dev/clasp/internal/dbfile"
	"github.com/clasp-dev/clasp/internal/store/sqlite"
)

// useDataDir creates the data directory if needed and takes its shared
// lock for a process that uses the SQLite database in it (serve, migrate,
// backup); it returns the release. While `clasp restore` holds the
// exclusive lock it fails, saying so.
func useDataDir(dir string) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	unlock, err = lockDataDir(dir, false)
	if errors.Is(err, errDirLocked) {
		return nil, fmt.Errorf("the database in %s is being replaced by clasp restore (it holds %s); try again when the restore has finished", dir, LockFileName)
	}
	return unlock, err
}

// errPostgresBackup answers backup and restore given a PostgreSQL URL.
var errPostgresBackup = usageErr(errors.New("clasp backup and clasp restore copy the embedded SQLite database (<data-dir>/" + DBFileName + "); " +
	"back up a PostgreSQL database with its own tools: pg_dump -Fc (restore with pg_restore into a fresh database) or pg_basebackup, see docs/backup.md"))

func (a *app) newBackupCmd() *cobra.Command {
	var dataDir, to, databaseURL string
	var force bool
	cmd := &cobra.Command{
		Use:   "backup --to FILE",
		Short: "Write a consistent copy of the SQLite database to a file, while the server runs",
		Long: `Write a consistent snapshot of <data-dir>/` + DBFileName + ` to FILE, online: a running
'clasp serve' goes on answering reads and writes meanwhile. The copy holds every
write committed before the backup began and none that committed after (one
read transaction, SQLite's VACUUM INTO), compacted into one self-contained file
(no -wal beside it), synced to disk, then checked (PRAGMA integrity_check, the
schema version, the lock invariant L7) before it is moved to FILE in one
rename. Progress (bytes written) and the result go to stderr.

FILE must not exist unless --force is given; its directory must exist. Nothing
is left at FILE when the backup fails or is interrupted (Ctrl-C).

The board token is not in the backup (only its hash): keep
<data-dir>/` + BoardTokenFileName + ` with it, or create a new board token after
a restore elsewhere. Put it back with 'clasp restore --from FILE' (server
stopped). For PostgreSQL (--database-url or ` + EnvDatabaseURL + `) use pg_dump or
pg_basebackup instead: see docs/backup.md.`,
		Example: `  clasp backup --to /backups/clasp-$(date +%F).db
  clasp backup --data-dir /var/lib/clasp --to /backups/clasp.db --force`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("data-dir") {
				dataDir = firstNonEmpty(a.getenv(EnvDataDir), dataDir)
			}
			if databaseURL != "" || a.getenv(EnvDatabaseURL) != "" {
				return errPostgresBackup
			}
			if to == "" {
				return usageErr(errors.New("--to FILE is required: the file to write the backup to"))
			}
			return backup(cmd.Context(), a.stderr, dataDir, to, force)
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", DefaultDataDir, "directory of the database to back up (env "+EnvDataDir+")")
	f.StringVar(&to, "to", "", "file to write the backup to (required; its directory must exist)")
	f.BoolVar(&force, "force", false, "replace FILE if it exists")
	addPostgresRefusal(f, &databaseURL)
	_ = cmd.MarkFlagFilename("to")
	_ = cmd.MarkFlagDirname("data-dir")
	return cmd
}

// backup writes the snapshot of dataDir's database to to (see the backup
// command), reporting progress and the result on w.
func backup(ctx context.Context, w io.Writer, dataDir, to string, force bool) error {
	src := filepath.Join(dataDir, DBFileName)
	if sameFile(src, to) || sameFile(src+"-wal", to) || sameFile(src+"-shm", to) {
		return usageErr(fmt.Errorf("--to %s is the database itself; write the backup to another file, ideally on another disk", to))
	}
	if st, err := os.Stat(to); err == nil {
		if st.IsDir() {
			return usageErr(fmt.Errorf("--to %s is a directory; name the backup file, e.g. %s", to, filepath.Join(to, "clasp-backup.db")))
		}
		if !force {
			return usageErr(fmt.Errorf("%s already exists; pass --force to replace it, or choose another --to", to))
		}
	}
	if st, err := os.Stat(filepath.Dir(to)); err != nil || !st.IsDir() {
		return usageErr(fmt.Errorf("the directory of --to %s does not exist; create it first", to))
	}
	if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no database at %s: is --data-dir (or %s) the directory 'clasp serve' uses?", src, EnvDataDir)
	}
	unlock, err := useDataDir(dataDir)
	if err != nil {
		return err
	}
	defer unlock()

	tmp := tempName(to)
	defer os.Remove(tmp) // gone after the rename; a failed or interrupted backup leaves nothing
	start := time.Now()
	fmt.Fprintf(w, "backup: copying %s to %s\n", src, to)
	stopProgress := reportProgress(w, tmp)
	version, err := dbfile.Snapshot(ctx, src, tmp)
	stopProgress()
	if dbfile.IsDiskFull(err) {
		return fmt.Errorf("backup failed, nothing written to %s: the disk under %s is full; free space there or choose another --to (the copy needs about the size of %s): %w",
			to, filepath.Dir(to), src, err)
	}
	if err != nil {
		return fmt.Errorf("backup failed, nothing written to %s: %w", to, err)
	}
	in, err := dbfile.Inspect(ctx, tmp)
	if errors.Is(err, dbfile.ErrNewerSchema) {
		return fmt.Errorf("backup not written to %s: the database's schema (version %d) is newer than this clasp knows (up to %d), so it cannot check the copy; run the backup with the clasp binary the server runs", to, version, sqlite.LatestSchemaVersion())
	}
	if err != nil {
		return fmt.Errorf("backup failed its check, nothing written to %s: %w", to, err)
	}
	if force {
		err = os.Rename(tmp, to)
	} else {
		// A hard link fails if to appeared meanwhile: never overwrite without --force.
		err = os.Link(tmp, to)
	}
	if err != nil {
		return fmt.Errorf("backup: move the copy to %s: %w", to, err)
	}
	if err := syncDir(filepath.Dir(to)); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	size := int64(0)
	if st, err := os.Stat(to); err == nil {
		size = st.Size()
	}
	fmt.Fprintf(w, "backup: wrote %s: %s, schema version %d, %d companies, %d issues (%d locked), %d activity rows; integrity ok; took %s\n",
		to, humanBytes(size), version, in.Companies, in.Issues, in.Locked, in.Activity, time.Since(start).Round(time.Millisecond))
	return nil
}

func (a *app) newRestoreCmd() *cobra.Command {
	var dataDir, from, databaseURL string
	cmd := &cobra.Command{
		Use:   "restore --from FILE",
		Short: "Replace the SQLite database with a backup (server stopped)",
		Long: `Replace <data-dir>/` + DBFileName + ` with the backup FILE made by 'clasp backup'.

Stop the server first: restore refuses while a 'clasp serve', 'clasp migrate'
or 'clasp backup' uses the data directory (they hold ` + LockFileName + `) or
any other process has the database open. FILE is copied next to the database
and the copy checked before anything is replaced: PRAGMA integrity_check and
foreign_key_check, clasp's schema at a version this binary knows (a backup
from a newer clasp is refused; an older one is migrated by the next
'clasp serve' as usual) and the lock invariant L7. Then the current database
(its WAL folded in) is kept as ` + DBFileName + `.before-restore-<time> and the copy
takes its place in one rename, so a crash leaves either the old database or
the new one. FILE itself is only read.

Runs still open in the backup are as the backup left them: their agents
heartbeat again or the sweeper fails them after their lease, as after any
restart. For PostgreSQL (--database-url or ` + EnvDatabaseURL + `) use pg_restore: see
docs/backup.md.`,
		Example: `  clasp restore --from /backups/clasp-2026-12-01.db
  clasp restore --data-dir /var/lib/clasp --from /backups/clasp.db`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("data-dir") {
				dataDir = firstNonEmpty(a.getenv(EnvDataDir), dataDir)
			}
			if databaseURL != "" || a.getenv(EnvDatabaseURL) != "" {
				return errPostgresBackup
			}
			if from == "" {
				return usageErr(errors.New("--from FILE is required: the backup file to restore"))
			}
			return restore(cmd.Context(), a.stderr, dataDir, from)
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", DefaultDataDir, "directory of the database to replace (env "+EnvDataDir+"); created if missing")
	f.StringVar(&from, "from", "", "backup file to restore (required; made by clasp backup)")
	addPostgresRefusal(f, &databaseURL)
	_ = cmd.MarkFlagFilename("from")
	_ = cmd.MarkFlagDirname("data-dir")
	return cmd
}

// restore replaces dataDir's database with the backup at from (see the
// restore command), reporting on w.
func restore(ctx context.Context, w io.Writer, dataDir, from string) error {
	st, err := os.Stat(from)
	if err != nil {
		return fmt.Errorf("backup file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return usageErr(fmt.Errorf("--from %s is not a file", from))
	}
	if sameFile(from, filepath.Join(dataDir, DBFileName)) {
		return usageErr(fmt.Errorf("--from %s is the database it would replace; name a backup file made by clasp backup", from))
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	unlock, err := lockDataDir(dataDir, true)
	if errors.Is(err, errDirLocked) {
		holder := "a clasp process (serve, migrate or backup)"
		if h := serveHolder(dataDir); h != "" {
			holder = "clasp serve (" + h + ")"
		}
		return fmt.Errorf("refusing to restore: %s is using %s (it holds %s); stop the server first", holder, dataDir, LockFileName)
	}
	if err != nil {
		return err
	}
	defer unlock()

	db := filepath.Join(dataDir, DBFileName)
	tmp := db + ".restore-tmp"
	for _, p := range []string{tmp, tmp + "-journal", tmp + "-wal", tmp + "-shm"} {
		_ = os.Remove(p) // left by an interrupted restore, if any
	}
	defer os.Remove(tmp)
	fmt.Fprintf(w, "restore: checking %s\n", from)
	if err := copyFile(from, tmp); err != nil {
		if dbfile.IsDiskFull(err) {
			return fmt.Errorf("restore failed, the database is unchanged: the disk under %s is full; the restore needs room for a copy of %s there: %w", dataDir, from, err)
		}
		return fmt.Errorf("restore: copy %s into %s: %w", from, dataDir, err)
	}
	in, err := dbfile.Inspect(ctx, tmp)
	if err != nil {
		return fmt.Errorf("refusing to restore %s: %w", from, err)
	}
	if err := dbfile.SyncFile(tmp); err != nil {
		return fmt.Errorf("restore: %w", err)
	}

	kept := ""
	if _, err := os.Stat(db); err == nil {
		// Fold the WAL into the current database (no other connection may
		// be open: leaving WAL mode needs them all closed) and keep it.
		kept = db + ".before-restore-" + time.Now().UTC().Format("20060102T150405Z")
		err := dbfile.Detach(ctx, db)
		if errors.Is(err, dbfile.ErrInUse) {
			return fmt.Errorf("refusing to restore: %w", err)
		}
		if err := os.Link(db, kept); err != nil {
			return fmt.Errorf("restore: keep the current database as %s: %w", kept, err)
		}
		if err != nil {
			// A damaged database (the reason to restore, often): keep its
			// WAL beside the kept copy too.
			fmt.Fprintf(w, "restore: the current database could not be closed cleanly (%v); keeping it with its WAL\n", err)
			if err := os.Rename(db+"-wal", kept+"-wal"); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("restore: keep the current WAL as %s-wal: %w", kept, err)
			}
		}
	}
	for _, p := range []string{db + "-wal", db + "-shm", db + "-journal"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("restore: remove %s: %w", p, err)
		}
	}
	if err := os.Rename(tmp, db); err != nil {
		return fmt.Errorf("restore: move the checked copy to %s: %w", db, err)
	}
	if err := syncDir(dataDir); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	fmt.Fprintf(w, "restore: %s restored to %s: schema version %d, %d companies, %d issues (%d locked), %d activity rows; integrity ok\n",
		from, db, in.SchemaVersion, in.Companies, in.Issues, in.Locked, in.Activity)
	if latest := sqlite.LatestSchemaVersion(); in.SchemaVersion < latest {
		fmt.Fprintf(w, "restore: the next 'clasp serve' migrates it from schema version %d to %d\n", in.SchemaVersion, latest)
	}
	if kept != "" {
		fmt.Fprintf(w, "restore: the previous database is kept as %s (delete it when you no longer need it)\n", kept)
	}
	return nil
}

// addPostgresRefusal registers a hidden --database-url on a backup or
// restore command, so that a PostgreSQL user is told about pg_dump and
// pg_restore instead of "unknown flag".
func addPostgresRefusal(f *pflag.FlagSet, url *string) {
	f.StringVar(url, "database-url", "", "PostgreSQL: refused, with how to use pg_dump/pg_restore instead")
	_ = f.MarkHidden("database-url")
}

// sameFile reports whether paths a and b name the same file: the same
// absolute path, or (both existing) the same inode.
func sameFile(a, b string) bool {
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	if err1 == nil && err2 == nil && aa == bb {
		return true
	}
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

// tempName is a fresh name beside path for a file written then renamed to path.
func tempName(path string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s.tmp-%s", path, hex.EncodeToString(b[:]))
}

// reportProgress prints the size of the file at path on w every second
// until the returned stop is called.
func reportProgress(w io.Writer, path string) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if st, err := os.Stat(path); err == nil {
					fmt.Fprintf(w, "backup: %s written\n", humanBytes(st.Size()))
				}
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// humanBytes formats n bytes as B, KiB, MiB or GiB.
func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// copyFile copies src to the new file dst (mode 0600) and syncs it.
func copyFile(src, dst string) error {
	in, err := os.Open(src) // #nosec G304 -- the backup file the user names
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600) // #nosec G304 -- a file in the data directory
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close() // the copy error is the one returned
		return err
	}
	if err := out.Sync(); err != nil {
		_ = out.Close() // the sync error is the one returned
		return err
	}
	return out.Close()
}

// syncDir fsyncs a directory, so that renames and links in it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir) // #nosec G304 -- a directory the user names
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		_ = d.Close() // the sync error is the one returned
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return d.Close()
}
