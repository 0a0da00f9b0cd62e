// Package swarm is clasp's main job on real input: it proves, with real OS
// processes and real SIGKILLs, that no issue is ever worked twice (scenarios
// S06, S08, S20, S24 in RULES.md).
//
// Run sets up a company with K agents on a clasp server (an embedded one on
// a fresh SQLite file, or an existing one), files one issue per regular file
// of a directory tree (the work: compute the file's SHA-256), launches K
// processes of `clasp agent work` (Worker), kills a share of them with
// SIGKILL in the middle of their work and starts replacements, waits for the
// sweeper to fail the killed processes' runs, and then calls Check, which
// reads the whole outcome back through the API as the board and lists every
// broken guarantee as a Violation.
//
// Worker is one agent process: open a run, find an issue (inbox first, then
// unassigned todo), check it out, hash the file while heartbeating, write
// the result comment and status done in one atomic PATCH, finish the run.
// It prints one machine-readable event line per step on stdout (see Event),
// which Run follows to time its kills and count conflicts.
//
// With Config.DatabaseURL Run starts no embedded server
// but N processes of `clasp serve` on one PostgreSQL database (replica.go,
// through internal/serveproc's Server), gives each agent process the list
// of replicas starting at a different one (its HTTP client fails over when
// it cannot connect), may SIGKILL a random replica every
// Config.KillReplicaEvery and restart it on the same port, and adds a
// check: every checkout and result an agent saw acknowledged (its event
// lines, Ack) is reflected in the database (CheckWithAcks). That check
// runs on the embedded server too.
//
// Only internal/cli imports this package.
package swarm
