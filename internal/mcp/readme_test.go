package mcp_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestREADMERegistration checks the README's MCP registration snippets:
// each runs `clasp mcp` (or names /mcp) and names CLASP_URL and
// CLASP_API_KEY explicitly, because MCP clients do not pass their own
// environment; the JSON one parses and has the mcpServers shape.
func TestREADMERegistration(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "## Coding agents over MCP\n")
	if !ok {
		t.Fatal("README has no section 'Coding agents over MCP'")
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	blocks := map[string]string{}
	for rest := sec; ; {
		_, after, ok := strings.Cut(rest, "```")
		if !ok {
			break
		}
		lang, after, _ := strings.Cut(after, "\n")
		body, after, _ := strings.Cut(after, "```")
		blocks[lang] = body
		rest = after
	}
	for _, lang := range []string{"sh", "json", "toml"} {
		body, ok := blocks[lang]
		if !ok {
			t.Errorf("no %s registration snippet", lang)
			continue
		}
		for _, want := range []string{"CLASP_URL", "CLASP_API_KEY", "mcp"} {
			if !strings.Contains(body, want) {
				t.Errorf("%s snippet does not name %s:\n%s", lang, want, body)
			}
		}
	}
	var cfg struct {
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(blocks["json"]), &cfg); err != nil {
		t.Fatalf("JSON snippet: %v", err)
	}
	c := cfg.MCPServers["clasp"]
	if c.Command != "clasp" || strings.Join(c.Args, " ") != "mcp" || c.Env["CLASP_URL"] == "" || c.Env["CLASP_API_KEY"] == "" {
		t.Errorf("JSON snippet entry: %+v", c)
	}
	if !strings.Contains(blocks["sh"], "-- clasp mcp") || !strings.Contains(blocks["toml"], "[mcp_servers.clasp]") {
		t.Errorf("Claude Code or Codex snippet shape")
	}
}
