package store

import "github.com/clasp-dev/clasp"

// Scope is the company an actor is confined to: an agent's own company,
// a company-scoped operator's company (a board actor with CompanyID), ""
// (no restriction) for an unscoped board and the system: such an actor
// reads and writes only that company's rows.
func Scope(a Actor) string {
	if a.Type == clasp.ActorAgent || a.Type == clasp.ActorBoard {
		return a.CompanyID
	}
	return ""
}
