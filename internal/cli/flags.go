package cli

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// checkClientFlags runs before every command (beforeCommand) and checks
// the flags every client command shares, so that a mistake
// is refused with a sentence (exit 2) before a request is sent:
//   - the server URL (--url, else $CLASP_URL) must be an http or https URL;
//     a loopback host:port without a scheme ("127.0.0.1:3100",
//     "localhost:3100") is taken as http://host:port;
//   - --limit, where a command has it, must be 1 to 1000 (the most rows a
//     server returns per page);
//   - the run named by --run, else $CLASP_RUN_ID, must be a UUID.
//
// It sets a.baseURL to the URL the client commands call.
func (a *app) checkClientFlags(cmd *cobra.Command, _ []string) error {
	if f := cmd.Flags().Lookup("url"); f != nil {
		raw, from := a.url, "--url"
		if raw == "" {
			raw, from = a.getenv(EnvURL), EnvURL
		}
		if raw == "" {
			raw, from = DefaultURL, "the default URL"
		}
		u, err := serverURL(raw, from)
		if err != nil {
			return usageErr(err)
		}
		a.baseURL = u
	}
	if f := cmd.Flags().Lookup("run"); f != nil {
		if err := a.checkRunID(f.Value.String()); err != nil {
			return err
		}
	}
	if f := cmd.Flags().Lookup("response-timeout"); f != nil {
		if a.answerTimeout < 0 {
			return usageErr(fmt.Errorf("--response-timeout %s is negative: give a duration such as 2m, or 0 for no limit", a.answerTimeout))
		}
		// Set before the command's first request, on the one transport
		// its clients share.
		if tr, ok := a.hc.Transport.(*http.Transport); ok {
			tr.ResponseHeaderTimeout = a.answerTimeout
		}
	}
	if f := cmd.Flags().Lookup("limit"); f != nil && f.Changed {
		n, err := strconv.Atoi(f.Value.String())
		if err != nil || n < 1 || n > maxLimit {
			return usageErr(fmt.Errorf("--limit %s is out of range: a page has 1 to %d rows (use --all to follow every page)", f.Value.String(), maxLimit))
		}
	}
	return nil
}

// maxLimit is the most rows a clasp server returns in one page.
const maxLimit = 1000

// serverURL checks raw, a server root URL given by from (a flag or
// variable name, for the message), and returns it in the form the client
// takes. A loopback host:port without a scheme gets http://; anything else
// without http:// or https:// is an error saying what to write.
func serverURL(raw, from string) (string, error) {
	s := strings.TrimSpace(raw)
	// Several replicas may be listed, comma-separated (clasp agent work).
	parts := strings.Split(s, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if !strings.Contains(p, "://") {
			host, _, err := net.SplitHostPort(p)
			if err != nil || !isLoopbackHost(host) {
				return "", fmt.Errorf("%s %q has no scheme: write it as http://%s (plain HTTP, loopback only) or https://%s", from, raw, p, p)
			}
			p = "http://" + p
		}
		u, err := url.Parse(p)
		if err != nil {
			return "", fmt.Errorf("%s %q is not a URL: %v", from, raw, errors.Unwrap(err))
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return "", fmt.Errorf("%s %q has the scheme %q: a clasp server is reached at an http:// or https:// URL", from, raw, u.Scheme)
		}
		if u.Host == "" {
			return "", fmt.Errorf("%s %q names no host: write it as http://HOST:PORT", from, raw)
		}
		parts[i] = p
	}
	return strings.Join(parts, ","), nil
}

// checkRunID refuses, as a usage error, a run named by --run (flag, the
// command's --run value) or else $CLASP_RUN_ID that is not a run id (a
// UUID): the server would refuse it on every request (400), and a command
// that resolves other flags first would report those instead of the run.
func (a *app) checkRunID(flag string) error {
	raw, from := flag, "--run"
	if raw == "" {
		raw, from = a.getenv(EnvRunID), EnvRunID
	}
	if v := strings.TrimSpace(raw); v != "" {
		if _, err := uuid.Parse(v); err != nil || len(v) != 36 {
			return usageErr(fmt.Errorf("%s %q is not a run id: a run id is a UUID, as 'clasp run list' and 'clasp run open' print it", from, truncateArg(raw)))
		}
	}
	return nil
}

// truncateArg shortens a value the user gave to 64 bytes for a message.
func truncateArg(s string) string {
	if len(s) <= 64 {
		return s
	}
	return s[:64] + "..."
}
