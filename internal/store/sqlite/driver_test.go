package sqlite

import (
	"testing"

	"github.com/clasp-dev/clasp/internal/store/storetest"
)

func TestDriverScan(t *testing.T) {
	s := openTest(t, Options{})
	storetest.DriverScan(t, s.d, `SELECT NULL, 'x', NULL, 7, ?, NULL, 'x'`)
}
