// Package mcp is clasp's Model Context Protocol server: the tools through
// which a coding agent (Claude Code, Codex CLI, Cursor, Gemini CLI, ...)
// takes work from a clasp server, with ownership that lives as long as its
// session.
//
// One Session talks to one clasp server through the Go client (package
// client) as one agent. Over stdio (`clasp mcp`, Serve) a session owns a run
// it opens lazily (invocationSource "mcp"), heartbeats it every third of the
// lease TTL while tool calls keep coming, and finishes it when the client
// closes stdin (succeeded) or the process is told to stop (cancelled); a run
// given by a launcher (CLASP_RUN_ID, or a run token) is used and never
// finished. Over HTTP (NewHTTPHandler, mounted at /mcp by `clasp serve`)
// every request is its own session, stateless, acting in the run its
// credential names.
//
// Every tool answers a structured result (an Outcome and a Message sentence,
// plus the tool's fields); a refusal the model must act on (a conflict, a
// lost lock, a missing setting, a refused key) is a result with isError set,
// never a protocol error, which is kept for bugs.
package mcp

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// Environment variables read by LoadConfig.
//
// #nosec G101 -- the names of environment variables, not credentials.
const (
	EnvURL        = "CLASP_URL"          // server root, e.g. http://127.0.0.1:3100
	EnvAPIKey     = "CLASP_API_KEY"      // agent API key (clasp_ak_...) or run token (clasp_rt_...)
	EnvAPIKeyFile = "CLASP_API_KEY_FILE" // file holding the key (first line), when CLASP_API_KEY is unset
	EnvRunID      = "CLASP_RUN_ID"       // a run the launcher owns: used, heartbeated, never finished
	EnvRunToken   = "CLASP_RUN_TOKEN"    // a run token the launcher owns (wins over CLASP_API_KEY)
)

// DefaultIdleRelease is how long a stdio session keeps heartbeating its run
// without a tool call (Config.IdleRelease).
const DefaultIdleRelease = 20 * time.Minute

// InvocationSource is the invocationSource of the runs a session opens.
const InvocationSource = "mcp"

// Config is what a Session needs. Missing values are not an error at start:
// each tool then answers isError naming the missing setting (Missing).
type Config struct {
	URL string // server root; "" is a missing setting
	// Token is the bearer: an agent API key, or a run token (which names
	// its run: the launcher's, never finished by the session).
	Token string
	// RunID is a run the launcher owns (with an API key: sent as
	// X-Clasp-Run-Id). Empty with an API key: the session opens its own
	// run on the first call that needs one.
	RunID string
	// IdleRelease stops the heartbeat after this long without a tool call
	// (the lease then runs out and the sweeper releases what the run held).
	// Zero: DefaultIdleRelease; negative: never.
	IdleRelease time.Duration
	// KeyFileError is why the key file could not be read ("" if none was
	// named or it was read): reported by the tools, not at start.
	KeyFileError string
	// HTTP marks a request of the HTTP endpoint: the credential is its
	// Authorization header, not CLASP_API_KEY.
	HTTP bool
	// PublicURL is the server's root URL as the caller reached it, which
	// session_status reports (default URL; over HTTP, URL is the in-process
	// API's and means nothing to the caller).
	PublicURL string
}

// serverURL is the server's root URL as the caller knows it.
func (c Config) serverURL() string { return first(c.PublicURL, c.URL) }

// LoadConfig builds a Config from flag values (empty: not given) and the
// environment (getenv, e.g. os.Getenv): flags win, then CLASP_RUN_TOKEN,
// CLASP_API_KEY, the key file (flag, then CLASP_API_KEY_FILE), CLASP_URL and
// CLASP_RUN_ID. It reads the key file but makes no network call and never
// fails: what is missing is reported by Config.Missing.
func LoadConfig(flagURL, flagKey, flagKeyFile, flagRunID string, idle time.Duration, getenv func(string) string) Config {
	c := Config{
		URL:         first(flagURL, getenv(EnvURL)),
		Token:       first(flagKey, getenv(EnvRunToken), getenv(EnvAPIKey)),
		RunID:       first(flagRunID, getenv(EnvRunID)),
		IdleRelease: idle,
	}
	if c.Token == "" {
		if path := first(flagKeyFile, getenv(EnvAPIKeyFile)); path != "" {
			b, err := os.ReadFile(path) // #nosec G304 -- the key file the launcher named in CLASP_API_KEY_FILE
			switch {
			case err != nil:
				c.KeyFileError = fmt.Sprintf("the key file %s cannot be read: %v", path, err)
			default:
				line, _, _ := strings.Cut(string(b), "\n")
				c.Token = strings.TrimSpace(line)
				if c.Token == "" {
					c.KeyFileError = fmt.Sprintf("the key file %s is empty", path)
				}
			}
		}
	}
	return c
}

// Missing returns the first missing or unusable setting and a sentence
// saying how to fix it, or "", "" when the configuration is complete.
func (c Config) Missing() (setting, sentence string) {
	switch {
	case c.HTTP && c.Token == "":
		return "Authorization", "This request carries no credential: send the header Authorization: Bearer <agent API key or run token> (configure it as a header of this MCP server in the client). Retrying as is fails again."
	case c.HTTP && strings.HasPrefix(c.Token, "clasp_bt_"):
		return "Authorization", "The bearer is the board token; this endpoint acts as an agent. Send an agent API key (clasp_ak_...) or a run token instead."
	case c.Token == "" && c.KeyFileError != "":
		return EnvAPIKey, "clasp mcp has no API key: " + c.KeyFileError + ". Fix the file or set " + EnvAPIKey + " in this MCP server's env (in the MCP client's configuration), then restart the server. Do not retry the tool before that."
	case c.Token == "":
		return EnvAPIKey, "clasp mcp has no API key: " + EnvAPIKey + " is not set. Set it to the agent's API key (clasp_ak_...) in this MCP server's env in the MCP client's configuration (clients do not pass their own environment), then restart the server. Do not retry the tool before that."
	case strings.HasPrefix(c.Token, "clasp_bt_"):
		return EnvAPIKey, EnvAPIKey + " holds the board token; clasp mcp acts as an agent. Set it to an agent API key (clasp_ak_...: `clasp agent key create <agent>`), then restart the server."
	case c.URL == "":
		return EnvURL, "clasp mcp does not know the clasp server: " + EnvURL + " is not set. Set it (e.g. http://127.0.0.1:3100) in this MCP server's env in the MCP client's configuration, then restart the server. Do not retry the tool before that."
	}
	return "", ""
}

// RunToken reports whether the token is a run token (clasp_rt_...).
func (c Config) RunToken() bool { return strings.HasPrefix(c.Token, "clasp_rt_") }

// LauncherRun reports whether the run belongs to a launcher: a run id or a
// run token was given. The session then never opens or finishes a run.
func (c Config) LauncherRun() bool { return c.RunID != "" || c.RunToken() }

func first(vs ...string) string {
	for _, v := range vs {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}
