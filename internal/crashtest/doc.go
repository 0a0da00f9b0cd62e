// Package crashtest holds tests only: real `clasp serve` child processes
// (package serveproc) killed and restarted under load. Its tests are
// scenario S28 (a server killed in the middle of a load of checkouts loses
// no acknowledged write and leaves every issue consistent, on SQLite and
// PostgreSQL), the replica tests (several servers on one PostgreSQL:
// concurrent sweepers, gapless identifiers), heartbeat instances taken
// over, backups and a full disk.
package crashtest
