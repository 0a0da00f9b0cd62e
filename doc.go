// Package clasp holds the domain of the clasp coordination server: the
// resources of SPEC section 1 (companies, agents, runs, issues, comments,
// activity), their status enums, and the shared error type whose codes the
// server sends and the client decodes (SPEC section 3).
//
// It imports only the standard library; the server (internal/...), the Go
// client (client/) and the CLI all meet through these types.
package clasp
