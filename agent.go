package clasp

import (
	"strings"
	"time"
)

// AgentStatus is the status of an agent.
type AgentStatus string

// Agent statuses. A terminated agent's keys answer 401.
const (
	AgentActive     AgentStatus = "active"
	AgentPaused     AgentStatus = "paused"
	AgentTerminated AgentStatus = "terminated"
)

// Valid reports whether s is a known agent status.
func (s AgentStatus) Valid() bool {
	switch s {
	case AgentActive, AgentPaused, AgentTerminated:
		return true
	}
	return false
}

// Agent is a worker identity in a company.
type Agent struct {
	ID              string      `json:"id"`
	CompanyID       string      `json:"companyId"`
	Name            string      `json:"name"`
	NameKey         string      `json:"nameKey"`
	Role            string      `json:"role"`
	Status          AgentStatus `json:"status"`
	CreatedAt       time.Time   `json:"createdAt"`
	LastHeartbeatAt *time.Time  `json:"lastHeartbeatAt"`
}

// NameKey returns the name key of an agent name: trimmed and lower-cased.
// It is unique per company.
func NameKey(name string) string { return strings.ToLower(strings.TrimSpace(name)) }

// APIKey describes an agent API key. The secret itself is returned once, in
// Token, by the call that creates it, and stored only as a hash.
type APIKey struct {
	ID         string     `json:"id"`
	AgentID    string     `json:"agentId"`
	Prefix     string     `json:"prefix"`
	Name       string     `json:"name"` // a label for people ("default" when none was given)
	CreatedAt  time.Time  `json:"createdAt"`
	LastUsedAt *time.Time `json:"lastUsedAt"`
	RevokedAt  *time.Time `json:"revokedAt"`
	// Token is the secret, set only in the answer to key creation.
	Token string `json:"token,omitempty"`
}
