package postgres

import (
	"testing"

	"github.com/clasp-dev/clasp/internal/store"
	"github.com/clasp-dev/clasp/internal/store/storetest"
)

// TestHeartbeatContract runs the store.HeartbeatStore contract: adapter configs, wake-ups, managed runs
// and their processes, and the scheduler instances' registrations.
func TestHeartbeatContract(t *testing.T) {
	testURL(t)
	storetest.RunHeartbeat(t, func(t *testing.T) (store.Store, storetest.Hooks) {
		s := openTest(t, Options{})
		return s, store.NewTestHooks(s.DB)
	})
}
