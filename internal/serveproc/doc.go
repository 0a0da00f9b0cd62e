// Package serveproc runs `clasp serve` as a real child process that can be
// killed with SIGKILL, stopped, and restarted on the same port and the same
// data (Server, StartServer), and creates throwaway PostgreSQL databases
// for such servers (CreateDatabase).
//
// `clasp swarm --database-url` runs its replicas with it and `clasp verify
// --process` its faulted servers; the crash, replica and end-to-end tests
// (internal/crashtest and others) start their servers with it.
package serveproc
