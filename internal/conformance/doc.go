// Package conformance holds the Paperclip-protocol conformance test: the
// agent side of Paperclip's recorded wire protocol (checkout, release,
// their conflicts and errors, comments, PATCH, the reads agents rely on)
// and the board requests Paperclip's setup tools send, replayed against a
// real `clasp serve` process on SQLite and on PostgreSQL. It asserts the
// statuses and the fields a Paperclip agent reads, and pins where clasp
// deliberately answers otherwise (README, "Paperclip compatibility"). The
// package has no non-test code.
package conformance
