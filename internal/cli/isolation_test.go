package cli

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestServeAgentUIDRangeRefused: serve --agent-uid-range refuses, as a
// usage error saying why and before it opens anything, a value that is not
// FIRST-LAST, a range with root's uid or backwards, the flag together
// with --agent-user, and a server that is not root.
func TestServeAgentUIDRangeRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"not a range", []string{"--agent-uid-range", "200000"}, "is not FIRST-LAST"},
		{"not numbers", []string{"--agent-uid-range", "a-b"}, "decimal uids"},
		{"root", []string{"--agent-uid-range", "0-100"}, "includes uid 0 (root)"},
		{"backwards", []string{"--agent-uid-range", "300000-200000"}, "the first uid is above the last"},
		{"no uid", []string{"--agent-uid-range", "1000-4294967295"}, "means no uid"},
		{"with --agent-user", []string{"--agent-uid-range", "200000-265535", "--agent-user", "nobody"}, "--agent-uid-range and --agent-user exclude each other"},
	}
	if os.Geteuid() != 0 {
		cases = append(cases, struct {
			name string
			args []string
			want string
		}{"not root", []string{"--agent-uid-range", "200000-265535"}, fmt.Sprintf("--agent-uid-range needs the server to run as root (it starts each agent's processes as a uid of that agent, and kills them by uid); this server runs as uid %d", os.Geteuid())})
	}
	for _, c := range cases {
		dir := t.TempDir()
		r := runCLI(t, nil, "", append([]string{"serve", "--data-dir", dir, "--listen", "127.0.0.1:0"}, c.args...)...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d and %q", c.name, r.code, r.stderr, ExitUsage, c.want)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("%s: the refused server wrote %d entries in its data directory", c.name, len(ents))
		}
	}
}
