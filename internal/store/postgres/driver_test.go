package postgres

import (
	"testing"

	"github.com/clasp-dev/clasp/internal/store/storetest"
)

func TestDriverScan(t *testing.T) {
	s := openTest(t, Options{})
	storetest.DriverScan(t, s.d, `SELECT NULL::text, 'x'::text, NULL::bigint, 7::bigint, ?::timestamptz, NULL::timestamptz, 'x'::text`)
}
