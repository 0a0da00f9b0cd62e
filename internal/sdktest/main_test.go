package sdktest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	// The server's code, imported so that a change to it invalidates go
	// test's cached result (TestMain builds the binary from it, which the
	// cache does not see).
	_ "github.com/clasp-dev/clasp/internal/cli"
)

// claspBin is the clasp binary built once by TestMain; every test runs it
// as a real server process.
var claspBin string

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "clasp-sdktest-")
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
		return m.Run()
	}())
}
