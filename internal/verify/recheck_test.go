package verify_test

import (
	"os"
	"testing"
	"time"

	"github.com/clasp-dev/clasp/internal/verify"
)

// TestRecheckHistory re-checks a history a run kept (verify-history-*.json,
// written when a check was not Ok) named by $CLASP_VERIFY_HISTORY, and
// logs each partition's result and time; skipped without the variable.
//
//	CLASP_VERIFY_HISTORY=/tmp/verify/verify-history-X.json go test -run TestRecheckHistory -v ./internal/verify/
func TestRecheckHistory(t *testing.T) {
	path := os.Getenv("CLASP_VERIFY_HISTORY")
	if path == "" {
		t.Skip("CLASP_VERIFY_HISTORY not set")
	}
	h, err := verify.ReadHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	timeout := 2 * time.Minute
	if d, err := time.ParseDuration(os.Getenv("CLASP_VERIFY_CHECK_TIMEOUT")); err == nil {
		timeout = d
	}
	res, parts, files, err := verify.CheckPartitions(h, t.TempDir(), timeout)
	for _, p := range parts {
		t.Logf("%+v", p)
	}
	t.Logf("result %v, files %v, err %v", res, files, err)
}
