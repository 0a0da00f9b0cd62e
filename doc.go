// Package clasp holds the domain of the clasp coordination server: the
// resources (companies, agents, runs, issues, comments,
// activity), their status enums, and the shared error type whose codes the
// server sends and the client decodes (RULES.md, Errors and requests).
//
// It imports only the standard library; the server (internal/...), the Go
// client (client/) and the CLI all meet through these types.
package clasp
