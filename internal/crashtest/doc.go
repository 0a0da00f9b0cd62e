// Package crashtest is clasp's fault harness: it runs `clasp serve` as a
// real child process that can be killed with SIGKILL and restarted on the
// same port and the same data (Server), and creates throwaway PostgreSQL
// databases (CreateDatabase). Its tests are scenario S28 (a server killed
// in the middle of a load of checkouts loses no acknowledged write and
// leaves every issue consistent, on SQLite and PostgreSQL) and the replica
// tests of issue 3 (several servers on one PostgreSQL: concurrent
// sweepers, gapless identifiers).
//
// internal/swarm uses Server to run the replicas of
// `clasp swarm --database-url`; only tests and internal/swarm import this
// package.
package crashtest
