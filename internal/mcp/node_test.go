package mcp_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// nodeSrc holds the Node check: exact pinned versions and a committed
// package-lock.json.
const nodeSrc = "../../tests/mcp-node"

// EnvNodeDir names the directory, outside the repository, where the Node
// check's packages are installed (.ci/run sets it and runs npm ci there).
// Outside the tree, so that a `clasp swarm` of the repository does not
// file an issue per file of node_modules.
const EnvNodeDir = "CLASP_MCP_NODE_DIR"

// nodeDir copies the check into its install directory ($CLASP_MCP_NODE_DIR,
// or a per-lockfile directory of the user cache) and installs the pinned
// packages there with npm ci unless the same lockfile is installed already.
func nodeDir(t *testing.T, ctx context.Context, npm string) string {
	t.Helper()
	lock, err := os.ReadFile(filepath.Join(nodeSrc, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv(EnvNodeDir)
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(lock)
		dir = filepath.Join(cache, "clasp", "mcp-node-"+hex.EncodeToString(sum[:6]))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	installed, _ := os.ReadFile(filepath.Join(dir, "node_modules", ".package-lock.json"))
	prev, _ := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	for _, f := range []string{"package.json", "package-lock.json", "check.test.mjs"} {
		b, err := os.ReadFile(filepath.Join(nodeSrc, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if len(installed) == 0 || !bytes.Equal(prev, lock) {
		cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
		}
	}
	return dir
}

// TestNodeClients runs the third-party clients' check (check.test.mjs): the
// TypeScript MCP SDK client and the MCP Inspector CLI drive `clasp mcp`
// over stdio and /mcp over HTTP. Outside CI it is skipped only when npm is
// absent; in CI a missing npm fails it.
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
	dir := nodeDir(t, ctx, npm)
	cmd := exec.CommandContext(ctx, node, "--test", "check.test.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CLASP_BIN="+bin)
	// The script's Inspector calls set no deadline of their own; this
	// context bounds them all. Once it kills node, children left holding
	// the output pipe do not keep the test waiting.
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test check.test.mjs (in %s): %v\n%s", dir, err, out)
	}
	t.Logf("%s", out)
}
