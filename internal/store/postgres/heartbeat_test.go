package postgres

import (
	"testing"

	"github.com/clasp-dev/clasp/internal/store"
	"github.com/clasp-dev/clasp/internal/store/storetest"
)

// TestHeartbeatContract runs the store.HeartbeatStore contract (issue 4).
func TestHeartbeatContract(t *testing.T) {
	testURL(t)
	storetest.RunHeartbeat(t, func(t *testing.T) (store.Store, storetest.Hooks) {
		s := openTest(t, Options{})
		return s, &TestHooks{S: s}
	})
}
