package cli

import (
	"strings"
	"testing"
)

// TestForceReleaseHelpSaysWhatHappens: the help of issue force-release
// says what the lock rules do (the issue is unlocked; the still-live run
// may check it out again under a new epoch), not that the old run gets 409
// on its next write, and how to keep the old run away.
func TestForceReleaseHelpSaysWhatHappens(t *testing.T) {
	t.Parallel()
	r := runCLI(t, nil, "", "issue", "force-release", "--help")
	if r.code != 0 {
		t.Fatalf("exit code %d, stderr %s", r.code, r.stderr)
	}
	if strings.Contains(r.stdout, "409") {
		t.Errorf("help promises a 409 to the old holder:\n%s", r.stdout)
	}
	for _, want := range []string{"check the issue out again", "checkoutEpoch", "clasp issue update ISSUE --assignee", "clasp run finish"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("help lacks %q:\n%s", want, r.stdout)
		}
	}
}
