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
// as a real server process. goScenarios is the Go client's scenario
// program (./goscenarios). tmpRoot is the temporary directory both live
// in, removed when the tests end; the TypeScript build's copy lives there
// too.
var claspBin, goScenarios, tmpRoot string

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "clasp-sdktest-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		tmpRoot = dir
		claspBin = filepath.Join(dir, "clasp")
		goScenarios = filepath.Join(dir, "goscenarios")
		for bin, pkg := range map[string]string{claspBin: "github.com/clasp-dev/clasp/cmd/clasp", goScenarios: "github.com/clasp-dev/clasp/internal/sdktest/goscenarios"} {
			if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "build %s: %v\n%s", pkg, err, out)
				return 1
			}
		}
		return m.Run()
	}())
}
