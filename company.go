package clasp

import (
	"regexp"
	"time"
)

// Company is a tenant (SPEC section 1). Every agent, run, issue and activity
// row belongs to exactly one; nothing crosses companies.
type Company struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	IssuePrefix string    `json:"issuePrefix"`
	CreatedAt   time.Time `json:"createdAt"`
}

var issuePrefixRE = regexp.MustCompile(`^[A-Z]{2,10}$`)

// ValidIssuePrefix reports whether p is 2-10 upper-case ASCII letters.
func ValidIssuePrefix(p string) bool { return issuePrefixRE.MatchString(p) }
