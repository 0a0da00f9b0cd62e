package clasp

import (
	"regexp"
	"strings"
	"time"
)

// Company is a tenant. Every agent, run, issue and activity
// row belongs to exactly one; nothing crosses companies.
type Company struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	IssuePrefix string `json:"issuePrefix"`
	// BranchTemplate names the git branch of each issue's work
	// (DefaultBranchTemplate unless set; see BranchName).
	BranchTemplate string `json:"branchTemplate"`
	// EscalateAfterFailures is how many runs of one issue in a row may end
	// failed or timed out before the issue is escalated to a person
	// (RULES.md E1); 0 never escalates. Default 3.
	EscalateAfterFailures int       `json:"escalateAfterFailures"`
	CreatedAt             time.Time `json:"createdAt"`
	// ArchivedAt is when the company was archived (nil: it is not). An
	// archived company is left out of the company list unless archived
	// ones are asked for; nothing else about it changes, and it can be
	// restored (RULES.md, Actors and credentials).
	ArchivedAt *time.Time `json:"archivedAt"`
}

// AttentionItem is an issue that needs a person (RULES.md E5): escalated
// (its runs kept failing; RunFailures and FailureLog say how) or
// abandoned (in_progress with no live run holding it). Since is when it
// was escalated, or last changed.
type AttentionItem struct {
	IssueID         string    `json:"issueId"`
	Identifier      string    `json:"identifier"`
	Title           string    `json:"title"`
	Status          string    `json:"status"`
	AssigneeAgentID *string   `json:"assigneeAgentId"`
	Reason          string    `json:"reason"`
	Since           time.Time `json:"since"`
	RunFailures     int       `json:"runFailures"`
	FailureLog      *string   `json:"failureLog"`
}

// Reasons of AttentionItem.
const (
	AttentionEscalated = "escalated"
	AttentionAbandoned = "abandoned"
)

// DefaultEscalateAfterFailures is a new company's EscalateAfterFailures.
const DefaultEscalateAfterFailures = 3

// MaxEscalateAfterFailures is the largest EscalateAfterFailures.
const MaxEscalateAfterFailures = 100

var issuePrefixRE = regexp.MustCompile(`^[A-Z]{2,10}$`)

// ValidIssuePrefix reports whether p is 2-10 upper-case ASCII letters.
func ValidIssuePrefix(p string) bool { return issuePrefixRE.MatchString(p) }

// maxPrefixCandidates bounds IssuePrefixCandidates: past that many taken
// prefixes, a company create asks for an explicit issuePrefix.
const maxPrefixCandidates = 100

// IssuePrefixCandidates returns the issue prefixes a company named name
// may get when it is created without one (as Paperclip derives it), in the
// order they are tried: the first three ASCII letters of the name,
// upper-cased (padded with X to two letters when the name has fewer); then
// that base extended by the name's next letters, one at a time; then the
// base followed by one letter A-Z, then by two. Every candidate is valid
// (2-10 upper-case letters) and they are distinct; at most
// maxPrefixCandidates are returned.
func IssuePrefixCandidates(name string) []string {
	var letters []byte
	for _, r := range strings.ToUpper(name) {
		if r >= 'A' && r <= 'Z' {
			letters = append(letters, byte(r))
		}
	}
	for len(letters) < 2 {
		letters = append(letters, 'X')
	}
	base := string(letters[:min(3, len(letters))])
	seen := map[string]bool{}
	var out []string
	add := func(p string) bool {
		if !seen[p] && ValidIssuePrefix(p) {
			seen[p] = true
			out = append(out, p)
		}
		return len(out) < maxPrefixCandidates
	}
	add(base)
	for n := len(base) + 1; n <= min(len(letters), 10); n++ {
		if !add(string(letters[:n])) {
			return out
		}
	}
	for a := 'A'; a <= 'Z'; a++ {
		if !add(base + string(a)) {
			return out
		}
	}
	for a := 'A'; a <= 'Z'; a++ {
		for b := 'A'; b <= 'Z'; b++ {
			if !add(base + string(a) + string(b)) {
				return out
			}
		}
	}
	return out
}
