package clasp

import "time"

// OperatorRole is what an operator token may do (RULES.md, Actors and
// credentials).
type OperatorRole string

// Operator roles, from most to least allowed.
const (
	// RoleAdmin may do everything in its scope, including managing
	// operator tokens (and, unscoped, creating companies).
	RoleAdmin OperatorRole = "admin"
	// RoleOperator acts on issues, runs and agents within its scope.
	RoleOperator OperatorRole = "operator"
	// RoleViewer reads only: every write is 403 forbidden.
	RoleViewer OperatorRole = "viewer"
)

// Valid reports whether r is a known role.
func (r OperatorRole) Valid() bool {
	return r == RoleAdmin || r == RoleOperator || r == RoleViewer
}

// OperatorToken is a credential of a person or a tool acting as the board:
// a name, a role and a scope (every company, or the one CompanyID names).
// Only its hash is stored; Token is set only in the answer that created it.
type OperatorToken struct {
	ID        string       `json:"id"`
	Name      string       `json:"name"`
	Prefix    string       `json:"prefix"` // "clasp_ot_<id>": names the token without revealing it
	Role      OperatorRole `json:"role"`
	CompanyID *string      `json:"companyId"` // nil: every company
	CreatedAt time.Time    `json:"createdAt"`
	// ExpiresAt is when the token stops working (nil: never).
	ExpiresAt  *time.Time `json:"expiresAt"`
	LastUsedAt *time.Time `json:"lastUsedAt"`
	RevokedAt  *time.Time `json:"revokedAt"`
	// Token is the secret, set only in the answer to the token's creation.
	Token string `json:"token,omitempty"`
}

// Usable reports whether the token authenticates at now: not revoked and
// not expired.
func (t *OperatorToken) Usable(now time.Time) bool {
	return t.RevokedAt == nil && (t.ExpiresAt == nil || now.Before(*t.ExpiresAt))
}
