package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/clasp-dev/clasp/internal/secret"
)

// tokenArgWarning is printed on stderr when a command gets its token as
// a --token argument.
const tokenArgWarning = "clasp: warning: --token puts the secret on this process's command line, which every local user can read (ps, /proc/PID/cmdline); use $" + EnvToken + ", --token-file FILE or --token - (read from stdin)\n"

// addTokenFileFlags gives every command of the tree that has a --token
// flag a --token-file flag next to it (in the same flag set, so a
// persistent --token gets a persistent --token-file).
func addTokenFileFlags(c *cobra.Command) {
	const usage = "read the bearer token from this file (first line; - reads stdin), keeping it out of argv"
	switch {
	case c.PersistentFlags().Lookup("token") != nil:
		c.PersistentFlags().String("token-file", "", usage)
	case c.Flags().Lookup("token") != nil:
		c.Flags().String("token-file", "", usage)
	}
	for _, sub := range c.Commands() {
		addTokenFileFlags(sub)
	}
}

// resolveTokenFlags runs before every command (beforeCommand): it gives a command's
// --token its value from --token-file FILE (or - for stdin) or from stdin
// when --token is "-", and warns on stderr when the token itself came as
// an argument. Errors (usage): both --token and --token-file; a file that
// cannot be read or holds no token.
func (a *app) resolveTokenFlags(cmd *cobra.Command, _ []string) error {
	f := cmd.Flags()
	tok, file := f.Lookup("token"), f.Lookup("token-file")
	if tok == nil {
		return nil
	}
	from := ""
	switch {
	case file != nil && file.Changed && tok.Changed:
		return usageErr(errors.New("give the token once: --token or --token-file, not both"))
	case file != nil && file.Changed:
		from = file.Value.String()
	case tok.Changed && tok.Value.String() == "-":
		from = "-"
	case tok.Changed:
		fmt.Fprint(a.stderr, tokenArgWarning)
		return nil
	default:
		return nil
	}
	t, err := a.readToken(from)
	if err != nil {
		return usageErr(err)
	}
	return tok.Value.Set(t)
}

// readToken reads a token from path ("-": stdin): its first line, without
// surrounding space. Errors: the file cannot be read, or holds no token.
func (a *app) readToken(path string) (string, error) {
	var r io.Reader
	name := path
	if path == "-" {
		r, name = a.stdin, "stdin"
	} else {
		fh, err := os.Open(path) // #nosec G304 -- the token file the user named
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		defer fh.Close()
		r = fh
	}
	if r == nil {
		return "", fmt.Errorf("no token on %s", name)
	}
	line, err := bufio.NewReader(io.LimitReader(r, 64<<10)).ReadString('\n')
	if err != nil && err != io.EOF {
		return "", fmt.Errorf("read the token from %s: %w", name, err)
	}
	t := strings.TrimSpace(line)
	if t == "" {
		return "", fmt.Errorf("no token on %s (its first line is empty)", name)
	}
	return t, nil
}

// redactedArgs is a command line fit to record (bench --json's command):
// the value of --token is "[redacted]", a --database-url loses its
// password (redactURL), and any clasp credential elsewhere is masked.
func redactedArgs(args []string) []string {
	out := make([]string, len(args))
	for i, arg := range args {
		prev := ""
		if i > 0 {
			prev = args[i-1]
		}
		name, val, hasVal := strings.Cut(arg, "=")
		switch {
		case prev == "--token":
			arg = "[redacted]"
		case prev == "--database-url":
			arg = redactURL(arg)
		case hasVal && name == "--token":
			arg = name + "=[redacted]"
		case hasVal && name == "--database-url":
			arg = name + "=" + redactURL(val)
		}
		out[i] = secret.Mask(arg)
	}
	return out
}
