package crashtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// claspBin is the clasp binary built once by TestMain: the tests run it as
// real OS processes and kill them with SIGKILL.
var claspBin string

// TestMain builds the binary, runs the tests, and fails them if a goroutine
// outlives them.
func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "clasp-crashtest-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		claspBin = filepath.Join(dir, "clasp")
		if out, err := exec.Command("go", "build", "-o", claspBin, "github.com/clasp-dev/clasp/cmd/clasp").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build clasp: %v\n%s", err, out)
			return 1
		}
		code := m.Run()
		if code == 0 {
			if err := goleak.Find(); err != nil {
				fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
				return 1
			}
		}
		return code
	}())
}
