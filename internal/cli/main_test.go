package cli

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them (a server,
// sweeper or HTTP connection that was not stopped).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
