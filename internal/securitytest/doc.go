// Package securitytest holds clasp's security test suite: Go tests that
// start the real clasp binary (on SQLite and, with CLASP_TEST_POSTGRES_URL,
// on PostgreSQL) and check one promise each: what a server-managed agent
// can see of the server (environment, working directory, data directory,
// database, board token), that credentials stay out of run logs, argv,
// reports and profiles, and what the transport promises (TLS, mTLS, no
// plain HTTP off loopback, header limits). The promises of the API itself
// (limits, request ids, revocation of event streams) are checked against
// the real handler in internal/httpapi's security_test.go. The package has no code of its own; see its tests.
package securitytest
