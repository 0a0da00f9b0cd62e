package store

import "github.com/clasp-dev/clasp"

// Scope is the company an actor is confined to: an agent's own company, ""
// (no restriction) for the board and the system: an agent reads and
// writes only its own company's rows.
func Scope(a Actor) string {
	if a.Type == clasp.ActorAgent {
		return a.CompanyID
	}
	return ""
}
