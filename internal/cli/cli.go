// Package cli is the clasp command line: `clasp serve` and `clasp migrate`
// run the server on its database (an embedded SQLite file, or PostgreSQL
// with --database-url), and the client commands (company,
// agent, issue, run, activity) call a server through the Go client
// (package client). cmd/clasp calls Run and exits with its code; tests call
// Run too.
//
// Only cmd/clasp imports this package. Serve opens the concrete store and
// starts the server on it (package server, the one wiring of the API,
// board, sweeper and scheduler).
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// Exit codes of Run.
const (
	ExitOK       = 0
	ExitError    = 1 // any failure that is not a conflict or a usage error
	ExitUsage    = 2 // bad command, flag or argument
	ExitConflict = 3 // the server answered 409 (checkout_conflict, ownership_conflict, run_not_live, ...)
	// ExitInterrupted: Run's context ended (SIGINT or SIGTERM) while a
	// command was still working, as stopping `clasp events` or a
	// `--follow` ends it; nothing is printed.
	ExitInterrupted = 130
)

// Environment variables read by the commands.
const (
	EnvURL       = "CLASP_URL"        // server root for client commands (default DefaultURL)
	EnvToken     = "CLASP_TOKEN"      // bearer: agent key, run token or board token
	EnvRunID     = "CLASP_RUN_ID"     // run the agent acts in (X-Clasp-Run-Id)
	EnvCompanyID = "CLASP_COMPANY_ID" // default --company
	EnvDataDir   = "CLASP_DATA_DIR"   // serve/migrate data directory
	EnvListen    = "CLASP_LISTEN"     // serve listen address
)

// DefaultURL is the server client commands call when neither --url nor
// CLASP_URL is set.
const DefaultURL = "http://127.0.0.1:3100"

// Run runs the clasp command line with args (without the program name) and
// returns the process exit code: ExitOK, ExitError, ExitUsage,
// ExitConflict or ExitInterrupted. Environment variables are read with os.Getenv; the context
// ends long-running commands (serve) gracefully.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return run(ctx, args, stdin, stdout, stderr, os.Getenv)
}

// run is Run with an injectable environment (tests).
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	// One HTTP client per Run, whose idle connections close when Run returns.
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	defer hc.CloseIdleConnections()
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv, hc: hc}
	root := a.newRootCmd()
	markRunErrors(root)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return ExitInterrupted // stopped by its user: not an error to report
	}
	return a.report(cmd, err)
}

// app carries what every command shares: the standard streams, the
// environment and the client flags. Commands are methods on *app that
// return a *cobra.Command.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	hc             *http.Client

	// Client flags (persistent on each client command group).
	url, token, runID string
	jsonOut           bool
	// baseURL is the server URL the client commands call: --url, else
	// $CLASP_URL, else DefaultURL, as checkClientFlags repaired it.
	baseURL string
	caCert  string // --ca-cert (default $CLASP_CA_CERT)
	// answerTimeout is --response-timeout: how long a request waits for
	// the server to begin its answer (0: no limit).
	answerTimeout time.Duration
}

// newRootCmd builds the command tree.
//
// Commands defined in other files of this package register here too, such
// as the swarm's (swarm.go: `clasp swarm`; agentwork.go: `clasp agent work`).
func (a *app) newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "clasp",
		Short: "clasp: a shared backlog where at most one agent run works an issue at a time",
		Long: `clasp is a server that holds a shared backlog for AI agents and humans and
guarantees that at most one run works an issue at a time (checkout locks with
leases, fencing epochs and crash recovery), plus the client commands that talk
to it.

Start a server with 'clasp serve'; client commands call it at $CLASP_URL
(default ` + DefaultURL + `) with the bearer token in $CLASP_TOKEN: the board token
printed at first start (an admin operator token), another operator token
(clasp operator token create), an agent API key, or a run token. Agents acting with an
API key name their run in $CLASP_RUN_ID.

Exit codes: 0 ok, 1 error, 2 usage error, 3 conflict (the server answered 409),
130 stopped by SIGINT or SIGTERM before it was done.`,
		Example: `  clasp serve                                   # server on 127.0.0.1:3100, data in ./.clasp
  export CLASP_TOKEN=$(cat .clasp/board-token)
  clasp company create "Acme" --prefix ACME
  clasp issue list --company <id> --status todo`,
		SilenceErrors:     true,
		SilenceUsage:      true,
		RunE:              groupRunE,
		PersistentPreRunE: a.beforeCommand,
		Version:           clasp.Version(),
	}
	// --version prints what `clasp version` prints.
	root.SetVersionTemplate(clasp.Build().String() + "\n")
	// `clasp completion bash|zsh|fish|powershell` is cobra's default
	// completion command, added when the command runs.
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageErr(err) })

	agent := a.newAgentCmd()
	agent.AddCommand(a.newAgentWorkCmd())
	root.AddCommand(
		a.newSwarmCmd(),
		a.newVerifyCmd(),
		a.newBenchCmd(),
		a.newServeCmd(),
		a.newMigrateCmd(),
		a.newBackupCmd(),
		a.newRestoreCmd(),
		a.newCompanyCmd(),
		a.newOperatorCmd(),
		a.newBoardTokenCmd(),
		a.newGateCmd(),
		a.newWebhookCmd(),
		agent,
		a.newIssueCmd(),
		a.newRunCmd(),
		a.newActivityCmd(),
		a.newEventsCmd(),
		a.newMCPCmd(),
		a.newVersionCmd(),
	)
	addTokenFileFlags(root)
	return root
}

// beforeCommand is the root's PersistentPreRunE (cobra runs only the
// nearest one, so both checks live here): it resolves the token flags
// (resolveTokenFlags), then checks the flags every client command shares
// (checkClientFlags). It returns the first usage error.
func (a *app) beforeCommand(cmd *cobra.Command, args []string) error {
	if err := a.resolveTokenFlags(cmd, args); err != nil {
		return err
	}
	return a.checkClientFlags(cmd, args)
}

// groupRunE is the RunE of command groups (clasp, clasp issue, ...): with no
// argument it prints the help, with one it reports an unknown command and
// the group's subcommands whose names are close to it ("did you mean").
func groupRunE(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if cmd.SuggestionsMinimumDistance <= 0 {
			cmd.SuggestionsMinimumDistance = 2
		}
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t") + "\n"
		}
		return usageErr(errors.New(msg))
	}
	return cmd.Help()
}

// newGroup returns a command group with the client flags.
func (a *app) newGroup(use, short, long, example string) *cobra.Command {
	g := &cobra.Command{Use: use, Short: short, Long: long, Example: example, RunE: groupRunE}
	a.addClientFlags(g)
	return g
}

// addClientFlags registers --url, --token, --run and --json as persistent
// flags of cmd (so its subcommands inherit them).
func (a *app) addClientFlags(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
	f.StringVar(&a.url, "url", "", "server root URL (default $"+EnvURL+" or "+DefaultURL+")")
	f.StringVar(&a.token, "token", "", "bearer token: an operator token (the board token is one), an agent API key or a run token (default $"+EnvToken+")")
	f.StringVar(&a.runID, "run", "", "run id to act in, sent as X-Clasp-Run-Id (default $"+EnvRunID+")")
	f.BoolVar(&a.jsonOut, "json", false, "print the resource JSON instead of a table")
	f.StringVar(&a.caCert, "ca-cert", "", "PEM file of CA certificates to trust for an https:// server, besides the system's (default $"+EnvCACert+")")
	f.DurationVar(&a.answerTimeout, "response-timeout", DefaultResponseTimeout, "longest to wait for the server to begin an answer (a server that took the connection but does not answer fails the command after it; 0: no limit)")
}

// DefaultResponseTimeout is the default of --response-timeout: well past
// the server's own default request deadline (30 s), so a slow answer is
// the server's to end, while a server that will never answer does not hang
// a command (or the agent waiting on it) for ever.
const DefaultResponseTimeout = 2 * time.Minute

// caFile is the CA file the client commands trust: --ca-cert, else $CLASP_CA_CERT.
func (a *app) caFile() string { return firstNonEmpty(a.caCert, a.getenv(EnvCACert)) }

// client returns a client configured from the client flags and environment.
func (a *app) client() *client.Client {
	return a.newClient(firstNonEmpty(a.runID, a.getenv(EnvRunID)))
}

// meClient is client without the run of --run or $CLASP_RUN_ID: finding
// who the caller is needs no run, and a run that has ended must not stop
// the command from reaching the request that names it (whose answer then
// says what is wrong with the run).
func (a *app) meClient() *client.Client { return a.newClient("") }

func (a *app) newClient(runID string) *client.Client {
	u := firstNonEmpty(a.baseURL, a.url, a.getenv(EnvURL), DefaultURL)
	return client.New(u,
		client.WithToken(a.bearer()),
		client.WithRunID(runID),
		client.WithUserAgent("clasp-cli"),
		client.WithHTTPClient(a.hc),
		a.caOption(),
	)
}

// bearer is the token the client commands send: --token (or what
// --token-file read), else $CLASP_TOKEN, without surrounding space; ""
// when neither holds one (an empty or blank $CLASP_TOKEN is unset).
func (a *app) bearer() string {
	return strings.TrimSpace(firstNonEmpty(a.token, a.getenv(EnvToken)))
}

// caOption is client.WithCACert of caFile, or nothing without one.
func (a *app) caOption() client.Option {
	if ca := a.caFile(); ca != "" {
		hc, err := client.NewHTTPClient(ca)
		if err != nil {
			return client.WithCACert(ca) // each request then fails with the CA file's error
		}
		hc.Transport.(*http.Transport).ResponseHeaderTimeout = a.answerTimeout
		return client.WithHTTPClient(hc)
	}
	return func(*client.Client) {}
}

// companyID resolves the company a command works in: the --company flag,
// then $CLASP_COMPANY_ID (either an id, an issue prefix or a name:
// resolveCompany), then the calling agent's company (GET /agents/me) when
// the token is an agent credential.
func (a *app) companyID(ctx context.Context, c *client.Client, flag string) (string, error) {
	if flag != "" {
		return a.resolveCompany(ctx, flag, "--company")
	}
	if env := a.getenv(EnvCompanyID); env != "" {
		return a.resolveCompany(ctx, env, EnvCompanyID)
	}
	if !isAgentToken(a.bearer()) {
		return "", usageErr(errors.New("--company is required (or set " + EnvCompanyID + "): a company's id, issue prefix or name"))
	}
	me, err := a.meClient().Me(ctx)
	if err != nil {
		return "", fmt.Errorf("find the company of the calling agent (pass --company): %w", err)
	}
	return me.CompanyID, nil
}

// agentID resolves the agent a command acts for: flag, else the calling
// agent (GET /agents/me).
func (a *app) agentID(ctx context.Context, c *client.Client, flag string) (string, error) {
	if flag != "" {
		return a.resolveAgent(ctx, "", flag, "--agent")
	}
	if !isAgentToken(a.bearer()) {
		if run, from := a.runID, "--run"; run != "" || a.getenv(EnvRunID) != "" {
			if run == "" {
				run, from = a.getenv(EnvRunID), EnvRunID
			}
			return "", usageErr(fmt.Errorf("the board token never acts in a run (%s %s): to act as the agent, use its run token, or its API key with --run; to act for it as the board, drop %s and name the agent with --agent", from, run, from))
		}
		return "", usageErr(errors.New("--agent is required with the board token"))
	}
	me, err := a.meClient().Me(ctx)
	if err != nil {
		return "", fmt.Errorf("find the calling agent (pass --agent): %w", err)
	}
	return me.ID, nil
}

// runRef resolves a run id from the first argument, --run or $CLASP_RUN_ID.
func (a *app) runRef(args []string) (string, error) {
	if len(args) > 0 {
		return args[0], nil
	}
	if id := firstNonEmpty(a.runID, a.getenv(EnvRunID)); id != "" {
		return id, nil
	}
	return "", usageErr(errors.New("a run id is required (argument, --run or " + EnvRunID + ")"))
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// headerWording is what the CLI says instead of the API's words about the
// run header, which the CLI sets from --run or $CLASP_RUN_ID.
var headerWording = []struct{ api, cli string }{
	{"send the X-Clasp-Run-Id (or X-Paperclip-Run-Id) header, or use a run token", "pass --run RUN_ID (or set " + EnvRunID + "), or use the run's token as --token"},
	{"(header X-Clasp-Run-Id or X-Paperclip-Run-Id)", "(pass --run RUN_ID or set " + EnvRunID + ")"},
	{"the run named by the X-Clasp-Run-Id header", "the run named by --run"},
	{"the run named by the X-Paperclip-Run-Id header", "the run named by --run"},
	{"Header X-Clasp-Run-Id", "--run"},
	{"the Idempotency-Key header", "--idempotency-key"},
	{"Idempotency-Key", "--idempotency-key"},
	{"X-Clasp-Run-Id", "--run"},
}

// cliWording rewrites an API message for the command line: what names an
// HTTP header names the flag (or environment variable) that sets it.
func (a *app) cliWording(msg string) string {
	for _, w := range headerWording {
		cli := w.cli
		if a.runID == "" && a.getenv(EnvRunID) != "" {
			cli = strings.ReplaceAll(cli, "named by --run", "named by $"+EnvRunID)
			if w.api == "Header X-Clasp-Run-Id" || w.api == "X-Clasp-Run-Id" {
				cli = "$" + EnvRunID
			}
		}
		msg = strings.ReplaceAll(msg, w.api, cli)
	}
	return msg
}

// usageError marks an error as the caller's misuse of the command line (exit 2).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usageErr(err error) error { return &usageError{err: err} }

// runError marks an error returned by a command's RunE (as opposed to
// cobra's own parsing errors, which are usage errors).
type runError struct{ err error }

func (e *runError) Error() string { return e.err.Error() }
func (e *runError) Unwrap() error { return e.err }

// exitError makes Run return Code. When Err is nil the command has already
// reported the failure and Run prints nothing more.
type exitError struct {
	Code int
	Err  error
}

func (e *exitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}
func (e *exitError) Unwrap() error { return e.Err }

// markRunErrors wraps the RunE of cmd and its descendants so that their
// errors are told apart from cobra's usage errors.
func markRunErrors(cmd *cobra.Command) {
	if f := cmd.RunE; f != nil {
		cmd.RunE = func(c *cobra.Command, args []string) error {
			err := f(c, args)
			var ue *usageError
			if err == nil || errors.As(err, &ue) {
				return err
			}
			return &runError{err: err}
		}
	}
	for _, sub := range cmd.Commands() {
		markRunErrors(sub)
	}
}

// report prints err (if any) to stderr and returns the exit code.
func (a *app) report(cmd *cobra.Command, err error) int {
	if err == nil {
		return ExitOK
	}
	// An error may quote what someone else wrote (a name, a title).
	stderr := a.stderr
	a.stderr = textWriter{stderr}
	defer func() { a.stderr = stderr }()
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.Err != nil {
			a.printError(ee.Err)
		}
		return ee.Code
	}
	var re *runError
	var ue *usageError
	if errors.As(err, &ue) || !errors.As(err, &re) {
		fmt.Fprintf(a.stderr, "error: %v\n", err)
		path := "clasp"
		if cmd != nil {
			path = cmd.CommandPath()
		}
		fmt.Fprintf(a.stderr, "Run '%s --help' for usage.\n", path)
		return ExitUsage
	}
	a.printError(re.err)
	if client.IsConflict(re.err) {
		return ExitConflict
	}
	return ExitError
}

// printError writes "error: <message> (<code>)" (with the context the
// command added, if any), the holder named in a conflict's details, and the
// other details.
func (a *app) printError(err error) {
	var nc *client.NotClaspError
	if errors.As(err, &nc) {
		// Not a clasp answer: no code to show, and never the page itself.
		fmt.Fprintf(a.stderr, "error: %v\n", err)
		fmt.Fprintf(a.stderr, "Point to a clasp server with --url or %s (now %s).\n", EnvURL, firstNonEmpty(a.baseURL, DefaultURL))
		return
	}
	e := clasp.AsError(err)
	// net/http says only in its text that the timeout was the wait for
	// the answer's headers (a command's own deadline is another timeout).
	var ne net.Error
	if e == nil && a.answerTimeout > 0 && errors.As(err, &ne) && ne.Timeout() && strings.Contains(err.Error(), "timeout awaiting response headers") {
		fmt.Fprintf(a.stderr, "error: %v\n", err)
		fmt.Fprintf(a.stderr, "The server at %s took the connection but did not begin its answer within %s (--response-timeout): it may be overloaded or stuck; its log may say why.\n",
			firstNonEmpty(a.baseURL, DefaultURL), a.answerTimeout)
		return
	}
	if e == nil {
		fmt.Fprintf(a.stderr, "error: %v\n", err)
		if client.IsConnectionError(err) {
			fmt.Fprintf(a.stderr, "Is the server running? Point to it with --url or %s.\n", EnvURL)
		}
		return
	}
	if err == error(e) {
		fmt.Fprintf(a.stderr, "error: %s (%s)\n", a.cliWording(e.Message), e.Code)
	} else {
		// Keep the context the command added (it ends with the code).
		fmt.Fprintf(a.stderr, "error: %s\n", a.cliWording(err.Error()))
	}
	if _, ok := e.Details["header"]; ok {
		// The message names the flag or variable that set the header.
		e = &clasp.Error{Code: e.Code, Message: e.Message, Details: maps.Clone(e.Details)}
		delete(e.Details, "header")
	}
	if holder, _ := e.Details["checkoutRunId"].(string); holder != "" {
		fmt.Fprintf(a.stderr, "held by run %s", holder)
		if exec, _ := e.Details["executionRunId"].(string); exec != "" && exec != holder {
			fmt.Fprintf(a.stderr, " (executing run %s)", exec)
		}
		if as, _ := e.Details["assigneeAgentId"].(string); as != "" {
			fmt.Fprintf(a.stderr, ", assignee agent %s", as)
		}
		fmt.Fprintln(a.stderr)
	}
	keys := make([]string, 0, len(e.Details))
	for k := range e.Details {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		if v := e.Details[k]; v != nil {
			parts = append(parts, fmt.Sprintf("%s=%v", k, v))
		}
	}
	if len(parts) > 0 {
		fmt.Fprintf(a.stderr, "details: %s\n", strings.Join(parts, " "))
	}
	if e.Code == clasp.CodeUnauthenticated && a.bearer() == "" {
		fmt.Fprint(a.stderr, noTokenHint)
	}
}

// noTokenHint follows a 401 to a command that sent no token: an empty
// $CLASP_TOKEN counts as unset, so say where a token comes from.
const noTokenHint = `No token was sent: --token and --token-file are not given and ` + EnvToken + ` is unset or empty.
Set ` + EnvToken + ` to the board token (the file board-token in the server's data directory),
an agent API key ('clasp agent key create') or a run token.
`
