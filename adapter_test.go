package clasp

import "testing"

// TestAdapterConfigRefusesUnstartable: configs that can never start a
// process (NUL bytes, a relative or bad cwd, env names the server sets
// itself for each run) are refused with 400 invalid_request naming the
// field, instead of failing at spawn time.
func TestAdapterConfigRefusesUnstartable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		edit  func(c *AdapterConfig)
		field string
	}{
		{"nul in command", func(c *AdapterConfig) { c.Command = "/bin/tr\x00ue" }, "command"},
		{"nul in arg", func(c *AdapterConfig) { c.Args = []string{"ok", "b\x00d"} }, "args[1]"},
		{"relative cwd", func(c *AdapterConfig) { c.Cwd = "relative" }, "cwd"},
		{"nul in env value", func(c *AdapterConfig) { c.Env = map[string]string{"A": "x\x00y"} }, "env"},
		{"reserved env", func(c *AdapterConfig) { c.Env = map[string]string{"CLASP_API_KEY": "x"} }, "env"},
		{"reserved paperclip env", func(c *AdapterConfig) { c.Env = map[string]string{"PAPERCLIP_RUN_ID": "x"} }, "env"},
		{"unknown type", func(c *AdapterConfig) { c.Type = "docker" }, "type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := AdapterConfig{Type: AdapterProcess, Command: "/bin/true", Cwd: "/tmp"}
			tc.edit(&c)
			err := c.Normalize()
			e := AsError(err)
			if e == nil || e.Code != CodeInvalidRequest || e.Details["field"] != tc.field {
				t.Errorf("Normalize() = %v, want invalid_request naming %q", err, tc.field)
			}
		})
	}
	ok := AdapterConfig{Type: AdapterProcess, Command: "/bin/true", Cwd: "/tmp", Env: map[string]string{"MY_VAR": "1"}}
	if err := ok.Normalize(); err != nil {
		t.Errorf("a valid config: Normalize() = %v, want nil", err)
	}
}
