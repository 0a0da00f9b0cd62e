package sdktest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSwarmWithExampleAgents runs `clasp swarm --agent-cmd` with the Python
// and the TypeScript example agents on a small tree, SIGKILLing agents at
// 20% of their checkouts: the swarm's own checks (every issue done once,
// with exactly one correct result comment, no lock or live run left, every
// acknowledged write in the database) must pass, so it exits 0.
func TestSwarmWithExampleAgents(t *testing.T) {
	langs := languages(t)
	tree := t.TempDir()
	for i := range 16 {
		dir := filepath.Join(tree, fmt.Sprintf("d%d", i%3))
		if err := os.MkdirAll(dir, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%02d", i)), []byte(strings.Repeat(fmt.Sprintf("file %d\n", i), i*50+1)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range langs {
		t.Run(l.name, func(t *testing.T) {
			l.ready(t)
			var agent string
			switch l.name {
			case "python":
				py, _ := exec.LookPath("python3")
				agent = py + " " + filepath.Join(repoRoot, "examples/python-agent/agent.py")
			case "typescript":
				node, _ := exec.LookPath("node")
				agent = node + " " + filepath.Join(typescriptBuild(t), "../../examples/typescript-agent/agent.mjs")
			}
			cmd := exec.Command(claspBin, "swarm", "--dir", tree, "--agents", "3", "--kill-rate", "0.2", "--slow", "20ms",
				"--timeout", "5m", "--data-dir", t.TempDir(), "--agent-cmd", agent, "--json") // #nosec G204 -- the binary under test
			cmd.Env = cleanEnv()
			var stderr syncBuffer
			cmd.Stderr = &stderr
			start := time.Now()
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("clasp swarm --agent-cmd %q: %v\nreport: %s\nprogress:\n%s", agent, err, out, stderr.String())
			}
			var rep struct {
				Issues     int   `json:"issues"`
				Done       int   `json:"done"`
				Kills      int   `json:"kills"`
				Violations []any `json:"violations"`
			}
			if err := json.Unmarshal(out, &rep); err != nil {
				t.Fatalf("report: %v\n%s", err, out)
			}
			if rep.Issues != 16 || rep.Done != 16 || len(rep.Violations) != 0 {
				t.Errorf("report: %d issues, %d done, violations %v; want 16 done and none", rep.Issues, rep.Done, rep.Violations)
			}
			t.Logf("%s agents: 16 issues done in %.1fs with %d kills", l.name, time.Since(start).Seconds(), rep.Kills)
		})
	}
}
