package store

import (
	"testing"

	"github.com/clasp-dev/clasp"
)

// BenchmarkLockArgsCheckout builds the arguments of an agent's checkout
// statement as both stores do: LockArgs, ActorArgs, then the checkout's own.
//
//	go test ./internal/store -run '^$' -bench LockArgsCheckout -benchmem
func BenchmarkLockArgsCheckout(b *testing.B) {
	a := Actor{Type: clasp.ActorAgent, AgentID: "8c7f8e8a-3c1e-4a44-9d3c-6b1f0f0c2a11", CompanyID: "1c7f8e8a-3c1e-4a44-9d3c-6b1f0f0c2a11",
		RunID: "0b5d1c3e-8f7a-4c2b-9e6d-1a2b3c4d5e6f", RequestID: "2b5d1c3e-8f7a-4c2b-9e6d-1a2b3c4d5e6f"}
	b.ReportAllocs()
	for b.Loop() {
		args := ActorArgs(LockArgs("BN-12", a), a)
		args["agent"], args["expected"] = a.AgentID, []string{"todo"}
		if len(args) != 11 {
			b.Fatalf("%d arguments, want 11", len(args))
		}
	}
}
