package mcp_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// nodeDir holds the Node check: exact pinned versions and a committed
// package-lock.json (.ci/run installs them with npm ci).
const nodeDir = "../../tests/mcp-node"

// TestNodeClients runs the third-party clients' check (check.test.mjs): the
// TypeScript MCP SDK client and the MCP Inspector CLI drive `clasp mcp`
// over stdio and /mcp over HTTP. Outside CI it is skipped only when npm is
// absent; in CI a missing npm fails it. It installs the packages (npm ci)
// when node_modules is missing.
func TestNodeClients(t *testing.T) {
	npm, err := exec.LookPath("npm")
	node, nerr := exec.LookPath("node")
	if err != nil || nerr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("npm or node is not installed (CI must have them: .ci/run installs them)")
		}
		t.Skip("npm or node is not installed")
	}
	bin := claspBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if _, err := os.Stat(filepath.Join(nodeDir, "node_modules", ".bin", "mcp-inspector")); err != nil {
		cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = nodeDir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", nodeDir, err, out)
		}
	}
	cmd := exec.CommandContext(ctx, node, "--test", "check.test.mjs")
	cmd.Dir = nodeDir
	cmd.Env = append(os.Environ(), "CLASP_BIN="+bin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test check.test.mjs: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
