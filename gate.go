package clasp

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// StampKey is the git trailer key that stamps a commit with the issue and
// the fencing epoch it was written under: "Clasp-Issue: ACME-12@7".
const StampKey = "Clasp-Issue"

// BranchPrefix is the prefix of the branches of issues under the default
// branch template (DefaultBranchTemplate): an issue's work goes on branch
// BranchPrefix + identifier ("clasp/ACME-12"). A commit on such a branch
// without a stamp is refused by the gate.
const BranchPrefix = "clasp/"

// Workspace is where a holder does an issue's work: the git branch of the
// issue, and the stamp (a commit trailer) that carries the fencing epoch
// of its checkout.
type Workspace struct {
	Branch string `json:"branch"`
	Stamp  string `json:"stamp"`
	Epoch  int64  `json:"epoch"`
}

// WorkspaceOf returns the workspace of issue identifier checked out at
// epoch under the default branch template (WorkspaceFor takes a
// company's).
func WorkspaceOf(identifier string, epoch int64) *Workspace {
	return &Workspace{Branch: BranchPrefix + identifier, Stamp: Stamp(identifier, epoch), Epoch: epoch}
}

// Stamp returns the trailer of issue identifier at epoch.
func Stamp(identifier string, epoch int64) string {
	return fmt.Sprintf("%s: %s", StampKey, StampValue(identifier, epoch))
}

// StampValue returns the trailer value "ACME-12@7".
func StampValue(identifier string, epoch int64) string {
	return fmt.Sprintf("%s@%d", identifier, epoch)
}

var stampRE = regexp.MustCompile(`^([A-Za-z]{2,10}-[1-9][0-9]{0,17})@(0|[1-9][0-9]{0,17})$`)

// ParseStamp reads a trailer value "ACME-12@7" (white space around it is
// ignored; the identifier is upper-cased). ok is false when it is not one.
func ParseStamp(v string) (GateStamp, bool) {
	m := stampRE.FindStringSubmatch(strings.TrimSpace(v))
	if m == nil {
		return GateStamp{}, false
	}
	e, err := strconv.ParseInt(m[2], 10, 64)
	if err != nil {
		return GateStamp{}, false
	}
	return GateStamp{Issue: strings.ToUpper(m[1]), Epoch: e}, true
}

// GateStamp is one stamp the gate is asked about: issue identifier and
// epoch.
type GateStamp struct {
	Issue string `json:"issue"`
	Epoch int64  `json:"epoch"`
}

// The reasons of a gate verdict (RULES.md, The git gate).
const (
	GateHeld       = "held"       // ok: held by a live run at this epoch
	GateCompleted  = "completed"  // ok: done, completed under this epoch
	GateSuperseded = "superseded" // a later checkout took the issue
	GateDeadHolder = "dead_holder"
	GateNotHeld    = "not_held" // the epoch is current, but nobody holds the issue and it is not done at it
	GateUnknown    = "unknown"  // no issue of the gate's company has this identifier
	GateFuture     = "future"   // an epoch the issue never reached
)

// GateVerdict is the gate's answer about one stamp: whether a commit
// carrying it may be written, and why.
type GateVerdict struct {
	Issue        string  `json:"issue"`
	Epoch        int64   `json:"epoch"`
	OK           bool    `json:"ok"`
	Reason       string  `json:"reason"`
	Message      string  `json:"message"`
	CurrentEpoch *int64  `json:"currentEpoch"`
	Status       *string `json:"status"`
	HolderRunID  *string `json:"holderRunId"`
	HolderAgent  *string `json:"holderAgent"`
}

// GateToken is a read-only credential of one company that may only ask
// the gate about stamps (POST /api/gate/check). The secret is shown once
// at creation and stored hashed.
type GateToken struct {
	ID         string     `json:"id"`
	CompanyID  string     `json:"companyId"`
	Name       string     `json:"name"`
	Prefix     string     `json:"prefix"`
	CreatedAt  time.Time  `json:"createdAt"`
	LastUsedAt *time.Time `json:"lastUsedAt"`
	RevokedAt  *time.Time `json:"revokedAt"`
	// Token is the secret, set only in the answer that creates it.
	Token string `json:"token,omitempty"`
}
