package cli

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/clasp-dev/clasp/internal/mcp"
)

// newMCPCmd is `clasp mcp`: an MCP server over stdio for coding agents
// (package mcp).
func (a *app) newMCPCmd() *cobra.Command {
	var url, key, keyFile, runID, logLevel string
	var idle time.Duration
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve clasp's tools to a coding agent over MCP (stdio)",
		Long: `Run a Model Context Protocol server on stdin/stdout for a coding agent (Claude
Code, Codex CLI, Cursor, Gemini CLI, ...): tools to claim an issue, check one
out, comment, and set it done, in_review or blocked, acting as the agent whose
API key is $` + mcp.EnvAPIKey + ` (or --key, or the first line of --key-file /
$` + mcp.EnvAPIKeyFile + `) on the clasp server at $` + mcp.EnvURL + ` (or --url).

It starts at once and calls the server only when a tool is called; a missing
setting does not stop it: every tool then answers an error naming the setting.
Logs go to stderr; stdout carries only the protocol.

The run: with $` + mcp.EnvRunID + ` (and the agent's key) or a run token
($` + mcp.EnvRunToken + `, or a clasp_rt_ token as the key), the launcher owns the run:
the tools act in it and this process never finishes it. Otherwise the first
tool call that needs a run opens one (invocationSource "mcp"), heartbeated every
third of the lease TTL while tool calls keep coming; after --idle-release
without a call the heartbeat stops, the lease runs out and the sweeper releases
what the run held. When stdin closes, every request already read is answered
first (a tool call in progress included); then the run is finished succeeded. It is
cancelled on SIGTERM or SIGINT; either way the finish clears the checkout and
execution locks the run held (its issues keep their status and assignee).
After SIGKILL the lease runs out and the sweeper clears them.`,
		Example: `  CLASP_URL=http://127.0.0.1:3100 CLASP_API_KEY=clasp_ak_... clasp mcp
  claude mcp add clasp --env CLASP_URL=http://127.0.0.1:3100 --env CLASP_API_KEY=clasp_ak_... -- clasp mcp`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := newLogger(a.stderr, logLevel)
			if err != nil {
				return usageErr(err)
			}
			if idle <= 0 {
				idle = -1 // never
			}
			if cmd.Flags().Changed("key") {
				fmt.Fprint(a.stderr, mcpKeyArgWarning)
			}
			cfg := mcp.LoadConfig(url, key, keyFile, runID, idle, a.getenv)
			if setting, _ := cfg.Missing(); setting != "" {
				log.Warn("not configured: every tool will answer an error naming the setting", "missing", setting)
			}
			sess := mcp.NewSession(cfg, mcp.Options{HTTPClient: a.hc, Logger: log})
			return mcp.Serve(cmd.Context(), sess, readCloser(a.stdin), writeCloser(a.stdout))
		},
	}
	f := cmd.Flags()
	f.StringVar(&url, "url", "", "clasp server root (default $"+mcp.EnvURL+")")
	f.StringVar(&key, "key", "", "agent API key or run token (default $"+mcp.EnvRunToken+", then $"+mcp.EnvAPIKey+")")
	f.StringVar(&keyFile, "key-file", "", "file whose first line is the API key (default $"+mcp.EnvAPIKeyFile+")")
	f.StringVar(&runID, "run", "", "a run the launcher owns, to act in and never finish (default $"+mcp.EnvRunID+")")
	f.DurationVar(&idle, "idle-release", mcp.DefaultIdleRelease, "stop heartbeating the session's run after this long without a tool call (0: never)")
	f.StringVar(&logLevel, "log-level", "info", "stderr log level: debug, info, warn or error")
	return cmd
}

// mcpKeyArgWarning is printed on stderr when clasp mcp gets its key as
// --key VALUE (the MCP client's stdout is the protocol, stderr its log).
const mcpKeyArgWarning = "clasp: warning: --key puts the secret on this process's command line, which every local user can read (ps, /proc/PID/cmdline); use $" + mcp.EnvAPIKey + " or --key-file FILE in the MCP client's configuration\n"

// readCloser and writeCloser adapt the app's streams to the transport.
func readCloser(r io.Reader) io.ReadCloser {
	if rc, ok := r.(io.ReadCloser); ok {
		return rc
	}
	return io.NopCloser(r)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func writeCloser(w io.Writer) io.WriteCloser {
	if f, ok := w.(*os.File); ok {
		return f
	}
	return nopWriteCloser{w}
}
